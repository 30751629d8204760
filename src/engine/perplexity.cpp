// compute_perplexity: teacher-forced scoring, log-softmax in double. It needs logits at every
// scored position, which the Engine (one sampled row per sequence) does not give, so it
// drives Forward directly over a KV pool of its own.
#include "engine/perplexity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kv/kv_cache.h"

namespace tandem {

PerplexityResult compute_perplexity(Forward& forward, std::span<const int32_t> tokens, int64_t ctx,
                                    int64_t batch_tokens, int32_t bos_id,
                                    const std::function<void(int64_t, double)>& on_chunk) {
  const ModelConfig& config = forward.model().config;
  TANDEM_CHECK_INPUT(ctx >= 4 && ctx <= config.context_length, "--ctx {} must be in 4..{} (the model's context)", ctx,
                     config.context_length);
  const auto n_chunks = static_cast<int64_t>(tokens.size()) / ctx;
  TANDEM_CHECK_INPUT(n_chunks > 0, "the text has {} tokens, fewer than one chunk of {}", tokens.size(), ctx);
  batch_tokens = std::min(batch_tokens, forward.max_batch_tokens());
  const int64_t vocab = config.vocab_size;

  constexpr int32_t kBlockSize = 16;
  KvCache cache(config.kv_shape(), (ctx + kBlockSize - 1) / kBlockSize, kBlockSize);
  const std::vector<int32_t> blocks = cache.whole_pool_blocks();  // each chunk overwrites the last
  double sum_nll = 0.0, sum_nll_squared = 0.0;
  int64_t count = 0;
  Batch batch;
  for (int64_t chunk = 0; chunk < n_chunks; ++chunk) {
    std::vector<int32_t> chunk_tokens(tokens.begin() + chunk * ctx, tokens.begin() + (chunk + 1) * ctx);
    if (bos_id >= 0) chunk_tokens[0] = bos_id;  // vocabularies without BOS keep the text token
    const int64_t first_scored = ctx / 2;
    for (int64_t start = 0; start < ctx; start += batch_tokens) {
      const int64_t end = std::min(ctx, start + batch_tokens);
      batch.clear();
      const int32_t seq = batch.add_sequence(blocks);
      for (int64_t i = start; i < end; ++i)
        batch.add(chunk_tokens[static_cast<size_t>(i)], static_cast<int32_t>(i), seq,
                  i >= first_scored && i <= ctx - 2);
      std::span<const float> logits = forward.run(batch, cache);
      int64_t row = 0;
      for (int64_t i = start; i < end; ++i) {
        if (!(i >= first_scored && i <= ctx - 2)) continue;
        const float* values = logits.data() + (row++) * vocab;
        double max_value = values[0];
        for (int64_t v = 1; v < vocab; ++v) max_value = std::max(max_value, static_cast<double>(values[v]));
        double sum = 0.0;
        for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(values[v]) - max_value);
        const double nll = -(values[chunk_tokens[static_cast<size_t>(i + 1)]] - max_value - std::log(sum));
        sum_nll += nll;
        sum_nll_squared += nll * nll;
        ++count;
      }
    }
    if (on_chunk) on_chunk(chunk, std::exp(sum_nll / static_cast<double>(count)));
  }
  PerplexityResult result;
  const double mean = sum_nll / static_cast<double>(count);
  result.perplexity = std::exp(mean);
  if (count > 1) {
    const double variance = std::max(0.0, sum_nll_squared / static_cast<double>(count) - mean * mean);
    result.uncertainty = result.perplexity * std::sqrt(variance / static_cast<double>(count - 1));
  }
  result.chunks = n_chunks;
  result.scored_tokens = count;
  return result;
}

}  // namespace tandem
