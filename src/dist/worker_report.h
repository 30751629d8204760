// WorkerReport: what a worker rank tells the front every report interval (kReport) — that it
// is alive, and its engine's state and transfer counters, which the front shows in /health and
// /metrics per worker and sums into the job's stats.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "engine/generation_service.h"

namespace tandem::dist {

// How often a worker reports. The front counts a worker down after --worker-timeout without one.
inline constexpr double kReportIntervalSeconds = 0.2;

struct WorkerReport {
  int64_t pid = 0;
  EngineStats engine;
  int64_t kv_bytes_sent = 0;
  int64_t kv_bytes_received = 0;
  double kv_send_seconds = 0.0;  // prefill: its KV blocks' sends, posted to complete, summed
  double kv_wait_seconds = 0.0;  // decode: per request, blocks asked for to all applied, summed
  int64_t requests_done = 0;
};

nlohmann::json report_to_json(const WorkerReport& report);
WorkerReport report_from_json(const nlohmann::json& json);

}  // namespace tandem::dist
