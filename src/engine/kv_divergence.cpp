// compare_kv_types: one chunk through the base KV cache (its scored logits kept), the same
// chunk through the tested one, and per scored position KL, argmax agreement and both NLLs.
#include "engine/kv_divergence.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/private_kv_pool.h"

namespace tandem {

namespace {

// log Σ exp(logits), in double.
double log_sum_exp(const float* logits, int64_t vocab) {
  double max_value = logits[0];
  for (int64_t v = 1; v < vocab; ++v) max_value = std::max(max_value, static_cast<double>(logits[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v]) - max_value);
  return max_value + std::log(sum);
}

int64_t argmax(const float* logits, int64_t vocab) { return std::max_element(logits, logits + vocab) - logits; }

}  // namespace

double kl_divergence(const float* p_logits, const float* q_logits, int64_t vocab) {
  const double p_norm = log_sum_exp(p_logits, vocab), q_norm = log_sum_exp(q_logits, vocab);
  double kl = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double log_p = p_logits[v] - p_norm, log_q = q_logits[v] - q_norm;
    kl += std::exp(log_p) * (log_p - log_q);
  }
  return std::max(0.0, kl);  // rounding can leave a tiny negative for identical rows
}

KvDivergenceResult compare_kv_types(Forward& forward, std::span<const int32_t> tokens, int64_t ctx,
                                    int64_t batch_tokens, int32_t bos_id, const KvTypes& base, const KvTypes& test,
                                    const std::function<void(int64_t, const KvDivergenceResult&)>& on_chunk) {
  using namespace perplexity_detail;
  const ModelConfig& config = forward.model().config;
  const int64_t n_chunks = check_chunks(config, tokens, ctx);
  const int64_t vocab = config.vocab_size;

  KvCache base_cache = make_private_kv_pool(config, ctx, base);
  KvCache test_cache = make_private_kv_pool(config, ctx, test);
  // One chunk's scored base logits: [ctx/2 - 1 or so, vocab].
  std::vector<float> base_logits;
  NllSums base_sums, test_sums;
  double kl_sum = 0.0;
  int64_t agreements = 0;
  KvDivergenceResult result;
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    const std::vector<int32_t> chunk_ids = chunk_tokens(tokens, ctx, chunk, bos_id);
    base_logits.clear();
    score_chunk(forward, base_cache, chunk_ids, batch_tokens, [&](const float* logits, int32_t next) {
      base_logits.insert(base_logits.end(), logits, logits + vocab);
      base_sums.add(negative_log_likelihood(logits, vocab, next));
    });
    int64_t row = 0;
    score_chunk(forward, test_cache, chunk_ids, batch_tokens, [&](const float* logits, int32_t next) {
      const float* reference = base_logits.data() + (row++) * vocab;
      test_sums.add(negative_log_likelihood(logits, vocab, next));
      const double kl = kl_divergence(reference, logits, vocab);
      kl_sum += kl;
      result.max_kl = std::max(result.max_kl, kl);
      agreements += argmax(reference, vocab) == argmax(logits, vocab) ? 1 : 0;
    });
    result.base = base_sums.result(chunk + 1);
    result.test = test_sums.result(chunk + 1);
    result.scored_tokens = test_sums.count;
    result.mean_kl = kl_sum / static_cast<double>(test_sums.count);
    result.top1_agreement = static_cast<double>(agreements) / static_cast<double>(test_sums.count);
    if (on_chunk) on_chunk(chunk, result);
  }
  return result;
}

}  // namespace tandem
