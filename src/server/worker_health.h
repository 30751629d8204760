// What /health and /metrics say of the worker processes behind a multi-process server
// (`tandem serve --workers`): each worker's role, whether it is up (and why not), and its
// queue and KV transfer counters. A single process has no workers and none of this.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generation_service.h"

namespace tandem::server {

// /health's body: status "ok" when every worker is up, "degraded" when some are down but a
// decode worker is left (the server still generates), "unavailable" when none is;
// `serving` says whether the answer is 200.
struct WorkerHealth {
  nlohmann::json body;
  bool serving = true;
};
WorkerHealth worker_health(const std::vector<WorkerStatus>& workers);

// Prometheus lines per worker, labelled rank and role: tandem_worker_up, _in_flight,
// _running, _waiting (its queue), _kv_sent_bytes_total, _kv_received_bytes_total,
// _kv_send_seconds_total (prefill), _kv_wait_seconds_total (decode), _requests_total.
std::string render_worker_metrics(const std::vector<WorkerStatus>& workers);

}  // namespace tandem::server
