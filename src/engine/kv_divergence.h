// How far a KV cache type moves a model's predictions from a base type (F32), measured as
// llama.cpp's --kl-divergence does: over the perplexity tool's scored positions (see
// perplexity.h), the mean KL(p_base || p_test) of the next-token distributions, and how often
// the most probable token is the same. Both runs happen in one process, chunk by chunk, so
// only one chunk's base logits are ever held.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "engine/perplexity.h"
#include "kv/kv_types.h"

namespace tandem {

struct KvDivergenceResult {
  PerplexityResult base;        // with the base types
  PerplexityResult test;        // with the tested types
  double mean_kl = 0.0;         // nats, mean over scored positions
  double max_kl = 0.0;          // the largest one position reached
  double top1_agreement = 0.0;  // fraction of scored positions with the same argmax
  int64_t scored_tokens = 0;
};

// As compute_perplexity, twice per chunk (base types, then test types). on_chunk(i, result so far).
KvDivergenceResult compare_kv_types(Forward& forward, std::span<const int32_t> tokens, int64_t ctx,
                                    int64_t batch_tokens, int32_t bos_id, const KvTypes& base, const KvTypes& test,
                                    const std::function<void(int64_t, const KvDivergenceResult&)>& on_chunk = {});

// KL(p || q) in nats of the softmaxes of two logit rows [vocab], in double.
double kl_divergence(const float* p_logits, const float* q_logits, int64_t vocab);

}  // namespace tandem
