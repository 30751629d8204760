// The evaluation tools' private KV pool and its feeding (see private_kv_pool.h).
#include "engine/private_kv_pool.h"

#include <algorithm>
#include <vector>

#include "model/batch.h"

namespace tandem {

namespace {

// Small blocks: a private pool wastes at most one block's slots, and block size does not
// change a lone sequence's results.
constexpr int32_t kPrivateBlockSize = 16;

}  // namespace

KvCache make_private_kv_pool(const ModelConfig& config, int64_t n_tokens, const KvTypes& types) {
  return KvCache(config.kv_shape(), (n_tokens + kPrivateBlockSize - 1) / kPrivateBlockSize, kPrivateBlockSize, types);
}

void feed_private_sequence(Forward& forward, KvCache& cache, std::span<const int32_t> tokens, int64_t batch_tokens,
                           const std::function<bool(int64_t)>& wants_logits,
                           const std::function<void(int64_t, int64_t, std::span<const float>)>& on_logits) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  batch_tokens = std::min(batch_tokens, forward.max_batch_tokens());
  const std::vector<int32_t> blocks = cache.whole_pool_blocks();
  Batch batch;
  for (int64_t start = 0; start < n_tokens; start += batch_tokens) {
    const int64_t end = std::min(n_tokens, start + batch_tokens);
    batch.clear();
    const int32_t seq = batch.add_sequence(blocks);
    for (int64_t i = start; i < end; ++i)
      batch.add(tokens[static_cast<size_t>(i)], static_cast<int32_t>(i), seq, wants_logits(i));
    on_logits(start, end, forward.run(batch, cache));
  }
}

}  // namespace tandem
