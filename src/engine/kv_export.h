// KvBlockSink: where a prefill-only request's KV blocks go as they are computed
// (disaggregated serving: a prefill rank's engine hands each finished block to src/dist,
// which packs it and sends it to the decode rank that owns the request). The engine knows
// no message format and no MPI; the sink knows no scheduling.
#pragma once

#include <cstdint>
#include <span>

#include "kv/kv_cache.h"

namespace tandem {

class KvBlockSink {
 public:
  virtual ~KvBlockSink() = default;
  // On the engine thread, once per block, in block order: `physical_block` of `cache` now
  // holds the K/V of positions [block_index * block_size, +block_size) of the request, whose
  // tokens those are; parent_hash is the prefix hash of the block before
  // (BlockAllocator::kRootHash for the first). The block is the request's until this returns:
  // read it here, not later.
  virtual void block_computed(const KvCache& cache, int32_t physical_block, int64_t block_index, uint64_t parent_hash,
                              std::span<const int32_t> tokens) = 0;
};

}  // namespace tandem
