// What /metrics says of the stages of a pipeline-parallel server (`tandem serve --pipeline S`):
// per stage, labelled stage and rank, what it holds and, over the micro-batches it ran, its
// compute and queue time. A single process has no stages and none of this.
#pragma once

#include <string>
#include <vector>

#include "engine/generation_service.h"

namespace tandem::server {

// tandem_stage_layers, _weight_bytes, _kv_bytes (gauges); _micro_batches_total, _tokens_total,
// _compute_seconds_total, _queue_seconds_total, _received_bytes_total (counters).
std::string render_stage_metrics(const std::vector<StageStatus>& stages);

}  // namespace tandem::server
