// plan_kv_pool and its start-up line (see kv_pool_plan.h).
#include "kv/kv_pool_plan.h"

#include <fmt/format.h>

#include "base/error.h"
#include "kv/kv_cache.h"

namespace tandem {

KvPoolPlan plan_kv_pool(const KvShape& shape, const KvTypes& types, int32_t block_size, int64_t context_length,
                        int64_t kv_memory_bytes, int32_t max_seqs) {
  TANDEM_ASSERT(block_size >= 1 && context_length >= 1 && max_seqs >= 1);
  KvPoolPlan plan;
  plan.types = types;
  plan.block_size = block_size;
  plan.bytes_per_token = KvCache::bytes_per_token(shape, types);
  plan.bytes_per_block = plan.bytes_per_token * block_size;
  plan.blocks_per_context = (context_length + block_size - 1) / block_size;
  plan.n_blocks = kv_memory_bytes > 0 ? kv_memory_bytes / plan.bytes_per_block : plan.blocks_per_context * max_seqs;
  plan.full_contexts = plan.n_blocks / plan.blocks_per_context;
  return plan;
}

std::string describe_kv_pool(const KvPoolPlan& plan, int64_t context_length) {
  return fmt::format("KV pool: {} blocks of {} tokens, {} bytes/token ({}), fits {} full contexts of {}", plan.n_blocks,
                     plan.block_size, plan.bytes_per_token, kv_types_description(plan.types), plan.full_contexts,
                     context_length);
}

}  // namespace tandem
