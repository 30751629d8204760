// KvCache storage (see kv_cache.h): zero-filled, 64-byte aligned K and V pools.
#include "kv/kv_cache.h"

#include "base/error.h"

namespace tandem {

KvCache::KvCache(const KvShape& shape, int64_t n_blocks, int32_t block_size)
    : n_layers_(shape.n_layers), n_blocks_(n_blocks), block_size_(block_size), row_stride_(row_stride(shape)) {
  TANDEM_ASSERT(n_blocks > 0 && block_size > 0);
  TANDEM_ASSERT(n_slots() <= INT32_MAX);  // slots are int32 in the attention kernels
  const auto lines = static_cast<size_t>(n_layers_ * n_slots() * row_stride_ / 16);
  keys_.assign(lines, CacheLine{});
  values_.assign(lines, CacheLine{});
}

}  // namespace tandem
