// Prometheus text exposition of the serving metrics (see metrics.h). Names follow the
// Prometheus conventions: base units (seconds), _total for counters.
#include "server/metrics.h"

#include <fmt/format.h>

namespace tandem::server {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double seconds) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && seconds > bounds_[bucket]) ++bucket;
  ++counts_[bucket];
  sum_ += seconds;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}),
      e2e_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}),
      queue_({0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}) {}

void Metrics::observe(const RequestEvent& e) {
  std::lock_guard lock(mutex_);
  if (e.finish_reason == FinishReason::Cancelled) {
    ++requests_cancelled_;
  } else {
    ++requests_ok_;
  }
  prompt_tokens_ += e.prompt_tokens;
  generated_tokens_ += e.completion_tokens;
  cached_tokens_ += e.cached_tokens;
  queue_.observe(e.queue_ms / 1000.0);
  e2e_.observe(e.e2e_ms / 1000.0);
  if (e.completion_tokens > 0) ttft_.observe(e.ttft_ms / 1000.0);
  for (double ms : e.itl_ms) itl_.observe(ms / 1000.0);
}

void Metrics::count_rejected() {
  std::lock_guard lock(mutex_);
  ++requests_rejected_;
}

void Metrics::count(TransportEvent event) {
  std::lock_guard lock(mutex_);
  switch (event) {
    case TransportEvent::Shed: ++shed_; break;
    case TransportEvent::ReadTimeout: ++read_timeouts_; break;
    case TransportEvent::WriteTimeout: ++write_timeouts_; break;
    case TransportEvent::Disconnect: ++disconnects_; break;
    case TransportEvent::ConnectionRefused: ++connections_refused_; break;
  }
}

std::string Metrics::render(const EngineStats& s, const TransportStats& transport) const {
  std::string out;
  const auto gauge = [&](const char* name, const char* help, double value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, help, name, name, value);
  };
  const auto counter = [&](const char* name, const char* help, int64_t value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} counter\n{} {}\n", name, help, name, name, value);
  };
  gauge("tandem_requests_running", "Requests admitted to the batch", static_cast<double>(s.running));
  gauge("tandem_requests_waiting", "Requests queued for admission", static_cast<double>(s.waiting));
  gauge("tandem_kv_blocks_total", "KV cache blocks in the pool", static_cast<double>(s.blocks.total));
  gauge("tandem_kv_blocks_used", "KV blocks referenced by sequences", static_cast<double>(s.blocks.used));
  gauge("tandem_kv_blocks_cached", "Unreferenced KV blocks kept for prefix reuse",
        static_cast<double>(s.blocks.cached));
  gauge("tandem_kv_blocks_free", "KV blocks holding nothing", static_cast<double>(s.blocks.free));
  gauge("tandem_kv_block_tokens", "Tokens per KV block", static_cast<double>(s.block_size));
  gauge("tandem_kv_block_bytes", "Bytes of K and V per block", static_cast<double>(s.bytes_per_block));
  const double ratio = s.blocks.lookup_tokens > 0
                           ? static_cast<double>(s.blocks.hit_tokens) / static_cast<double>(s.blocks.lookup_tokens)
                           : 0.0;
  gauge("tandem_prefix_cache_hit_ratio", "Prompt tokens served from the prefix cache / prompt tokens", ratio);
  counter("tandem_prefix_cache_hit_tokens_total", "Prompt tokens served from the prefix cache", s.blocks.hit_tokens);
  counter("tandem_preemptions_total", "Sequences preempted for lack of KV blocks", s.preemptions);
  counter("tandem_engine_steps_total", "Engine iterations run", s.steps);
  counter("tandem_spec_drafted_tokens_total", "Speculative decoding: tokens proposed and verified", s.drafted_tokens);
  counter("tandem_spec_accepted_tokens_total", "Speculative decoding: proposed tokens accepted", s.accepted_tokens);
  counter("tandem_grammar_masks_off_thread_total", "Grammar token masks computed off the engine thread",
          s.grammar_masks_off_thread);
  counter("tandem_grammar_masks_stopped_total", "Grammar masks stopped half way because their request ended",
          s.grammar_masks_stopped);
  counter("tandem_grammar_samples_awaited_total",
          "Samples that waited a step or more for their grammar mask (other sequences stepped on)",
          s.grammar_samples_awaited);
  std::lock_guard lock(mutex_);
  counter("tandem_requests_finished_total", "Requests that ran to a finish reason", requests_ok_);
  counter("tandem_requests_cancelled_total", "Requests cancelled (client gone or shutdown)", requests_cancelled_);
  counter("tandem_requests_rejected_total", "Requests refused with an error status", requests_rejected_);
  counter("tandem_prompt_tokens_total", "Prompt tokens of ended requests", prompt_tokens_);
  counter("tandem_generation_tokens_total", "Generated tokens of ended requests", generated_tokens_);
  counter("tandem_cached_prompt_tokens_total", "Prompt tokens of ended requests served from cache", cached_tokens_);

  gauge("tandem_http_connections_open", "Open client connections", static_cast<double>(transport.open_connections));
  gauge("tandem_http_requests_in_engine", "Generation requests submitted and not finished",
        static_cast<double>(transport.requests_in_engine));
  counter("tandem_http_requests_shed_total", "Requests answered 503 because --parallel + --max-queue were full", shed_);
  counter("tandem_http_read_timeouts_total", "Connections closed because a request did not arrive in time",
          read_timeouts_);
  counter("tandem_http_write_timeouts_total", "Connections closed because the client stopped reading", write_timeouts_);
  counter("tandem_http_disconnects_total", "Generation requests whose client left before the end", disconnects_);
  counter("tandem_http_connections_refused_total", "Connections answered 503 past --max-connections",
          connections_refused_);
  ttft_.render(out, "tandem_time_to_first_token_seconds", "Arrival to first generated token");
  itl_.render(out, "tandem_inter_token_latency_seconds", "Gap between consecutive generated tokens");
  e2e_.render(out, "tandem_e2e_request_latency_seconds", "Arrival to the end of the request");
  queue_.render(out, "tandem_queue_time_seconds", "Arrival to admission into the batch");
  return out;
}

}  // namespace tandem::server
