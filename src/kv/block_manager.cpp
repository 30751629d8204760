// BlockManager (see block_manager.h): sequence-level block bookkeeping on the allocator.
#include "kv/block_manager.h"

#include "base/error.h"

namespace tandem {

int64_t BlockManager::assign(SequenceBlocks& sequence, std::span<const int32_t> tokens, bool reuse_prefix) {
  TANDEM_ASSERT(sequence.empty() && !tokens.empty());
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> matched =
      allocator_.match_prefix(tokens, reuse_prefix ? (n_tokens - 1) / block_size() : 0, sequence.hashes);
  const int64_t needed = blocks_for(n_tokens) - static_cast<int64_t>(matched.size());
  if (allocator_.n_available() < needed) {
    for (auto it = matched.rbegin(); it != matched.rend(); ++it) allocator_.release(*it);
    sequence.hashes.clear();
    return -1;
  }
  sequence.table = std::move(matched);
  TANDEM_ASSERT(grow(sequence, n_tokens));
  return static_cast<int64_t>(sequence.hashes.size()) * block_size();
}

bool BlockManager::grow(SequenceBlocks& sequence, int64_t n_tokens) {
  while (static_cast<int64_t>(sequence.table.size()) * block_size() < n_tokens) {
    const int32_t block = allocator_.allocate();
    if (block < 0) return false;
    sequence.table.push_back(block);
  }
  return true;
}

void BlockManager::publish_computed(SequenceBlocks& sequence, std::span<const int32_t> tokens, int64_t n_computed) {
  const int64_t full = n_computed / block_size();
  for (auto i = static_cast<int64_t>(sequence.hashes.size()); i < full; ++i) {
    const uint64_t parent = i == 0 ? BlockAllocator::kRootHash : sequence.hashes.back();
    const std::span<const int32_t> piece =
        tokens.subspan(static_cast<size_t>(i * block_size()), static_cast<size_t>(block_size()));
    allocator_.publish(sequence.table[static_cast<size_t>(i)], parent, piece);
    sequence.hashes.push_back(BlockAllocator::hash_block(parent, piece));
  }
}

void BlockManager::truncate(SequenceBlocks& sequence, int64_t n_tokens) {
  TANDEM_ASSERT(n_tokens >= 0);
  const auto keep = static_cast<size_t>(blocks_for(n_tokens));
  TANDEM_ASSERT(sequence.hashes.size() <= keep);  // never drops a published or shared block
  while (sequence.table.size() > keep) {
    allocator_.release(sequence.table.back());
    sequence.table.pop_back();
  }
}

bool BlockManager::writable_from(const SequenceBlocks& sequence, int64_t from_position) const {
  for (auto i = static_cast<size_t>(from_position / block_size()); i < sequence.table.size(); ++i) {
    const int32_t block = sequence.table[i];
    if (allocator_.ref_count(block) != 1 || allocator_.is_published(block)) return false;
  }
  return true;
}

void BlockManager::release(SequenceBlocks& sequence) {
  for (auto it = sequence.table.rbegin(); it != sequence.table.rend(); ++it) allocator_.release(*it);
  sequence.table.clear();
  sequence.hashes.clear();
}

}  // namespace tandem
