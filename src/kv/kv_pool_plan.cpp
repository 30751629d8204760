// plan_kv_pool and its start-up line (see kv_pool_plan.h).
#include "kv/kv_pool_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/error.h"
#include "kv/kv_cache.h"

namespace tandem {

int64_t windowed_blocks_per_sequence(int32_t block_size, int64_t window, int64_t max_step_tokens) {
  TANDEM_ASSERT(block_size >= 1 && window >= 1 && max_step_tokens >= 1);
  // window - 1 + max_step_tokens positions; a run of L positions spans at most
  // ceil((L - 1) / block_size) + 1 blocks, whichever position it starts at.
  const int64_t positions = window - 1 + max_step_tokens;
  return (positions - 1 + block_size - 1) / block_size + 1;
}

KvPoolPlan plan_kv_pool(const KvShape& shape, const KvTypes& types, int32_t block_size, int64_t context_length,
                        int64_t kv_memory_bytes, int32_t max_seqs, int64_t window, int64_t max_step_tokens) {
  TANDEM_ASSERT(block_size >= 1 && context_length >= 1 && max_seqs >= 1);
  TANDEM_ASSERT(window == 0 || max_step_tokens >= 1);
  KvPoolPlan plan;
  plan.types = types;
  plan.block_size = block_size;
  plan.bytes_per_token = KvCache::bytes_per_token(shape, types);
  plan.bytes_per_block = plan.bytes_per_token * block_size;
  plan.blocks_per_context = (context_length + block_size - 1) / block_size;
  if (window > 0) {
    plan.window = window;
    plan.blocks_per_context =
        std::min(plan.blocks_per_context, windowed_blocks_per_sequence(block_size, window, max_step_tokens));
  }
  plan.n_blocks = kv_memory_bytes > 0 ? kv_memory_bytes / plan.bytes_per_block : plan.blocks_per_context * max_seqs;
  plan.full_contexts = plan.n_blocks / plan.blocks_per_context;
  return plan;
}

std::string describe_kv_pool(const KvPoolPlan& plan, int64_t context_length) {
  std::string line = fmt::format("KV pool: {} blocks of {} tokens, {} bytes/token ({}), fits {} full contexts of {}",
                                 plan.n_blocks, plan.block_size, plan.bytes_per_token, kv_types_description(plan.types),
                                 plan.full_contexts, context_length);
  if (plan.window > 0) line += fmt::format(" (window {}: {} blocks each)", plan.window, plan.blocks_per_context);
  return line;
}

}  // namespace tandem
