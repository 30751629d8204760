// sequence_logits: one sequence over a KV pool of its own (private_kv_pool.h), fed in order through Forward, all
// rows' logits copied out. Like perplexity it drives Forward directly: the Engine returns one
// sampled row per sequence, not the logits of every position.
#include "engine/sequence_logits.h"

#include <algorithm>

#include "base/error.h"
#include "engine/private_kv_pool.h"

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

  KvCache cache = make_private_kv_pool(config, n_tokens, kv_types);
  std::vector<float> logits(static_cast<size_t>(n_tokens * vocab));  // [n_tokens, vocab]
  feed_private_sequence(
      forward, cache, tokens, batch_tokens, [](int64_t) { return true; },
      [&](int64_t start, int64_t, std::span<const float> rows) {  // [end - start, vocab]
        std::copy(rows.begin(), rows.end(), logits.begin() + start * vocab);
      });
  return logits;
}

}  // namespace tandem
