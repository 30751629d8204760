// What /metrics says of the stages of a pipeline-parallel server (`tandem serve --pipeline S`):
// per stage, labelled stage and rank, what it holds and, over the micro-batches it ran, its
// compute and queue time; and of the ranks of a tensor-parallel one (`--tensor-parallel T`), per
// rank, what it holds and its all-reduces. A single process has none of this.
#pragma once

#include <string>
#include <vector>

#include "engine/generation_service.h"

namespace tandem::server {

// tandem_stage_layers, _weight_bytes, _kv_bytes (gauges); _micro_batches_total, _tokens_total,
// _compute_seconds_total, _queue_seconds_total, _received_bytes_total (counters).
std::string render_stage_metrics(const std::vector<StageStatus>& stages);

// tandem_tensor_parallel_weight_bytes, _kv_bytes (gauges); _all_reduces_total,
// _all_reduce_seconds_total, _all_reduce_sent_bytes_total (counters); labelled rank.
std::string render_tensor_parallel_metrics(const std::vector<TensorRankStatus>& ranks);

}  // namespace tandem::server
