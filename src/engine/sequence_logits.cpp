// sequence_logits: one sequence over a KV pool of its own, fed in order through Forward, all
// rows' logits copied out. Like perplexity it drives Forward directly: the Engine returns one
// sampled row per sequence, not the logits of every position.
#include "engine/sequence_logits.h"

#include <algorithm>

#include "base/error.h"
#include "kv/kv_cache.h"

namespace tandem {

std::vector<float> sequence_logits(Forward& forward, std::span<const int32_t> tokens, int64_t batch_tokens,
                                   const KvTypes& kv_types) {
  const ModelConfig& config = forward.model().config;
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  TANDEM_CHECK_INPUT(n_tokens > 0, "no token ids to evaluate");
  TANDEM_CHECK_INPUT(n_tokens <= config.context_length, "{} token ids, more than the model's context of {}", n_tokens,
                     config.context_length);
  batch_tokens = std::clamp<int64_t>(batch_tokens, 1, forward.max_batch_tokens());
  const int64_t vocab = config.vocab_size;

  constexpr int32_t kBlockSize = 16;
  KvCache cache(config.kv_shape(), (n_tokens + kBlockSize - 1) / kBlockSize, kBlockSize, kv_types);
  const std::vector<int32_t> blocks = cache.whole_pool_blocks();
  std::vector<float> logits(static_cast<size_t>(n_tokens * vocab));  // [n_tokens, vocab]
  Batch batch;
  for (int64_t start = 0; start < n_tokens; start += batch_tokens) {
    const int64_t end = std::min(n_tokens, start + batch_tokens);
    batch.clear();
    const int32_t seq = batch.add_sequence(blocks);
    for (int64_t i = start; i < end; ++i)
      batch.add(tokens[static_cast<size_t>(i)], static_cast<int32_t>(i), seq, /*logits=*/true);
    const std::span<const float> rows = forward.run(batch, cache);  // [end - start, vocab]
    std::copy(rows.begin(), rows.end(), logits.begin() + start * vocab);
  }
  return logits;
}

}  // namespace tandem
