// KV block message: one KV block of one sequence as one byte buffer — every layer's K and V
// rows of the block's filled slots in the cache's stored types, the block's token ids and
// its prefix hashes — what a prefill rank sends the decode rank that owns the request (issue
// 16). Packing reads a KvCache; applying writes into the receiver's own KvCache at a block it
// allocated. Knows nothing of MPI, ranks or scheduling. A buffer from another shape, type,
// block size or format version, or a truncated one, is refused with one line (InputError)
// before anything is written. The byte layout is in src/dist/README.md.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_cache.h"

namespace tandem {

// The prefix hash of a block that is not full: the block manager publishes full blocks only.
constexpr uint64_t kNoPrefixHash = 0;

// What a message says of its block besides the rows.
struct KvBlockInfo {
  int64_t block_index = 0;      // the block's place in its sequence: positions from block_index * block_size
  uint64_t parent_hash = 0;     // prefix hash of the block before (BlockAllocator::kRootHash for the first)
  uint64_t prefix_hash = 0;     // BlockAllocator::hash_block(parent_hash, tokens) when full, else kNoPrefixHash
  std::vector<int32_t> tokens;  // [n_filled] token ids at the filled positions, 1..block_size of them

  int32_t n_filled() const { return static_cast<int32_t>(tokens.size()); }
};

// Bytes of a message carrying n_filled positions of one of `cache`'s blocks.
int64_t kv_block_message_bytes(const KvCache& cache, int32_t n_filled);

// Packs slots 0..tokens.size()-1 of `block` of `cache` into `out` (resized; its capacity is
// reused, so a sender can keep one buffer per in-flight message). `tokens` are the ids at
// those positions of the sequence, block_index the block's place in it and parent_hash the
// prefix hash of the block before; the prefix hash is computed here when the block is full.
void pack_kv_block(const KvCache& cache, int32_t block, int64_t block_index, uint64_t parent_hash,
                   std::span<const int32_t> tokens, std::vector<uint8_t>& out);

// Checks a message against `cache` (format, shape, types, block size, exact length, the
// prefix hash against its tokens) and returns what it carries, writing nothing. InputError,
// one line, on anything wrong.
KvBlockInfo read_kv_block_info(std::span<const uint8_t> message, const KvCache& cache);

// Checks `message` as read_kv_block_info does, then copies its rows into slots 0..n_filled-1
// of `block` of `cache` (the receiver's own block; the slots after n_filled are untouched).
KvBlockInfo apply_kv_block(std::span<const uint8_t> message, KvCache& cache, int32_t block);

}  // namespace tandem
