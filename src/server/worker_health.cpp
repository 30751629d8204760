#include "server/worker_health.h"

#include <fmt/format.h>

namespace tandem::server {

WorkerHealth worker_health(const std::vector<WorkerStatus>& workers) {
  nlohmann::json list = nlohmann::json::array();
  bool all_up = true, decode_up = false;
  for (const WorkerStatus& w : workers) {
    all_up = all_up && w.up;
    decode_up = decode_up || (w.up && w.role == "decode");
    nlohmann::json entry = {{"rank", w.rank}, {"role", w.role}, {"up", w.up}, {"pid", w.pid}};
    if (!w.up) entry["down_reason"] = w.down_reason;
    list.push_back(std::move(entry));
  }
  const char* status = all_up ? "ok" : decode_up ? "degraded" : "unavailable";
  return {{{"status", status}, {"workers", std::move(list)}}, decode_up};
}

std::string render_worker_metrics(const std::vector<WorkerStatus>& workers) {
  if (workers.empty()) return {};
  std::string out;
  const auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const WorkerStatus& w : workers)
      out += fmt::format("{}{{rank=\"{}\",role=\"{}\"}} {}\n", name, w.rank, w.role, value(w));
  };
  family("tandem_worker_up", "gauge", "1 while the worker reports, 0 once it is counted down",
         [](const WorkerStatus& w) { return w.up ? 1 : 0; });
  family("tandem_worker_in_flight", "gauge",
         "Decode: requests routed to it and not finished; prefill: prompt blocks asked of it",
         [](const WorkerStatus& w) { return w.in_flight; });
  family("tandem_worker_running", "gauge", "Sequences in its engine's batch (its last report)",
         [](const WorkerStatus& w) { return w.running; });
  family("tandem_worker_waiting", "gauge",
         "Its queue: requests waiting for admission (decode: also those whose KV blocks are arriving)",
         [](const WorkerStatus& w) { return w.waiting; });
  family("tandem_worker_kv_sent_bytes_total", "counter", "KV block bytes a prefill worker sent to decode workers",
         [](const WorkerStatus& w) { return w.kv_bytes_sent; });
  family("tandem_worker_kv_received_bytes_total", "counter", "KV block bytes a decode worker received and applied",
         [](const WorkerStatus& w) { return w.kv_bytes_received; });
  family("tandem_worker_kv_send_seconds_total", "counter",
         "Summed over a prefill worker's KV blocks: each send, posted (as its chunk finished) to complete",
         [](const WorkerStatus& w) { return w.kv_send_seconds; });
  family("tandem_worker_kv_wait_seconds_total", "counter",
         "Summed over a decode worker's finished requests: asking for their KV blocks to the last one applied (the "
         "prefill rank's queue and compute included)",
         [](const WorkerStatus& w) { return w.kv_wait_seconds; });
  family("tandem_worker_requests_total", "counter", "Requests (prefill: prompt jobs) the worker finished",
         [](const WorkerStatus& w) { return w.requests_done; });
  return out;
}

}  // namespace tandem::server
