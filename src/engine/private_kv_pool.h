// The evaluation tools' one sequence over a KV pool of its own (perplexity, the KV type
// comparison, sequence_logits, the prefill benchmark): they need what the Engine does not
// give (logits at every position, a forward pass timed alone), so they drive Forward directly.
// One way to size that pool, and one way to feed the sequence through it in pieces. No
// scheduler, no block manager: the lone sequence owns every block, in order.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "kv/kv_cache.h"
#include "kv/kv_types.h"
#include "model/forward.h"
#include "model/model_config.h"

namespace tandem {

// A pool of just enough blocks for positions [0, n_tokens) of one sequence, K and V as
// `types`: sized to the job, so a tool's memory (and the benchmark's peak RSS) is what it needs,
// not the model's full context.
KvCache make_private_kv_pool(const ModelConfig& config, int64_t n_tokens, const KvTypes& types);

// Feeds `tokens` (positions 0, 1, ...) through `forward` over the whole of `cache`,
// batch_tokens at a time (at most the forward's max_batch_tokens); the rows with wants_logits(position) set get logits,
// and on_logits(start, end, rows) sees each piece's rows [n wanted in start..end-1, vocab].
void feed_private_sequence(Forward& forward, KvCache& cache, std::span<const int32_t> tokens, int64_t batch_tokens,
                           const std::function<bool(int64_t)>& wants_logits,
                           const std::function<void(int64_t, int64_t, std::span<const float>)>& on_logits);

}  // namespace tandem
