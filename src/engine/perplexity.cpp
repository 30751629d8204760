// compute_perplexity: teacher-forced scoring, log-softmax in double. It needs logits at every
// scored position, which the Engine (one sampled row per sequence) does not give, so it
// drives Forward directly over a KV pool of its own (private_kv_pool.h).
#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "engine/private_kv_pool.h"

namespace tandem {

namespace perplexity_detail {

int64_t check_chunks(const ModelConfig& config, std::span<const int32_t> tokens, int64_t ctx) {
  TANDEM_CHECK_INPUT(ctx >= 4 && ctx <= config.context_length, "--ctx {} must be in 4..{} (the model's context)", ctx,
                     config.context_length);
  const auto n_chunks = static_cast<int64_t>(tokens.size()) / ctx;
  TANDEM_CHECK_INPUT(n_chunks > 0, "the text has {} tokens, fewer than one chunk of {}", tokens.size(), ctx);
  return n_chunks;
}

std::vector<int32_t> chunk_tokens(std::span<const int32_t> tokens, int64_t ctx, int64_t chunk, int32_t bos_id) {
  std::vector<int32_t> chunk_ids(tokens.begin() + chunk * ctx, tokens.begin() + (chunk + 1) * ctx);
  if (bos_id >= 0) chunk_ids[0] = bos_id;  // vocabularies without BOS keep the text token
  return chunk_ids;
}

void score_chunk(Forward& forward, KvCache& cache, const std::vector<int32_t>& chunk, int64_t batch_tokens,
                 const std::function<void(const float*, int32_t)>& on_scored) {
  const auto ctx = static_cast<int64_t>(chunk.size());
  const int64_t vocab = forward.model().config.vocab_size;
  const int64_t first_scored = ctx / 2;
  auto scored = [&](int64_t i) { return i >= first_scored && i <= ctx - 2; };
  // Each chunk overwrites the last in the same pool.
  feed_private_sequence(forward, cache, chunk, batch_tokens, scored,
                        [&](int64_t start, int64_t end, std::span<const float> logits) {
                          int64_t row = 0;
                          for (int64_t i = start; i < end; ++i)
                            if (scored(i))
                              on_scored(logits.data() + (row++) * vocab, chunk[static_cast<size_t>(i + 1)]);
                        });
}

double negative_log_likelihood(const float* logits, int64_t vocab, int32_t target) {
  double max_value = logits[0];
  for (int64_t v = 1; v < vocab; ++v) max_value = std::max(max_value, static_cast<double>(logits[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v]) - max_value);
  return -(logits[target] - max_value - std::log(sum));
}

PerplexityResult NllSums::result(int64_t chunks) const {
  PerplexityResult result;
  const double mean = sum / static_cast<double>(count);
  result.perplexity = std::exp(mean);
  if (count > 1) {
    const double variance = std::max(0.0, sum_squared / static_cast<double>(count) - mean * mean);
    result.uncertainty = result.perplexity * std::sqrt(variance / static_cast<double>(count - 1));
  }
  result.chunks = chunks;
  result.scored_tokens = count;
  return result;
}

}  // namespace perplexity_detail

PerplexityResult compute_perplexity(Forward& forward, std::span<const int32_t> tokens, int64_t ctx,
                                    int64_t batch_tokens, int32_t bos_id, const KvTypes& kv_types,
                                    const std::function<void(int64_t, double)>& on_chunk) {
  using namespace perplexity_detail;
  const ModelConfig& config = forward.model().config;
  const int64_t n_chunks = check_chunks(config, tokens, ctx);
  const int64_t vocab = config.vocab_size;

  KvCache cache = make_private_kv_pool(config, ctx, kv_types);
  NllSums sums;
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    score_chunk(forward, cache, chunk_tokens(tokens, ctx, chunk, bos_id), batch_tokens,
                [&](const float* logits, int32_t next) { sums.add(negative_log_likelihood(logits, vocab, next)); });
    if (on_chunk) on_chunk(chunk, std::exp(sums.sum / static_cast<double>(sums.count)));
  }
  return sums.result(n_chunks);
}

}  // namespace tandem
