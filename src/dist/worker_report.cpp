#include "dist/worker_report.h"

namespace tandem::dist {

nlohmann::json report_to_json(const WorkerReport& r) {
  const EngineStats& e = r.engine;
  return {{"pid", r.pid},
          {"engine",
           {e.running, e.waiting, e.blocks.total, e.blocks.used, e.blocks.cached, e.blocks.free, e.blocks.lookup_tokens,
            e.blocks.hit_tokens, e.block_size, e.bytes_per_block, e.steps, e.preemptions, e.context_length}},
          {"kv", {r.kv_bytes_sent, r.kv_bytes_received, r.kv_send_seconds, r.kv_wait_seconds, r.requests_done}}};
}

WorkerReport report_from_json(const nlohmann::json& j) {
  WorkerReport r;
  r.pid = j.at("pid").get<int64_t>();
  const nlohmann::json& e = j.at("engine");
  r.engine.running = e.at(0);
  r.engine.waiting = e.at(1);
  r.engine.blocks.total = e.at(2);
  r.engine.blocks.used = e.at(3);
  r.engine.blocks.cached = e.at(4);
  r.engine.blocks.free = e.at(5);
  r.engine.blocks.lookup_tokens = e.at(6);
  r.engine.blocks.hit_tokens = e.at(7);
  r.engine.block_size = e.at(8);
  r.engine.bytes_per_block = e.at(9);
  r.engine.steps = e.at(10);
  r.engine.preemptions = e.at(11);
  r.engine.context_length = e.at(12);
  const nlohmann::json& kv = j.at("kv");
  r.kv_bytes_sent = kv.at(0);
  r.kv_bytes_received = kv.at(1);
  r.kv_send_seconds = kv.at(2);
  r.kv_wait_seconds = kv.at(3);
  r.requests_done = kv.at(4);
  return r;
}

}  // namespace tandem::dist
