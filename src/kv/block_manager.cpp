// BlockManager (see block_manager.h): sequence-level block bookkeeping on the allocator.
#include "kv/block_manager.h"

#include <algorithm>

#include "base/error.h"

namespace tandem {

int64_t BlockManager::assign(SequenceBlocks& sequence, std::span<const int32_t> tokens, bool reuse_prefix,
                             int64_t first_chunk) {
  TANDEM_ASSERT(sequence.empty() && !tokens.empty() && first_chunk >= 1);
  if (window_ > 0) return assign_windowed(sequence, tokens, first_chunk);
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

int64_t BlockManager::assign_windowed(SequenceBlocks& sequence, std::span<const int32_t> tokens, int64_t first_chunk) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  const int64_t block = block_size();
  // Every full block's prefix hash (known from the tokens alone) and its cached copy, if any.
  const int64_t max_blocks = std::min((n_tokens - 1) / block, n_tokens / block);
  std::vector<uint64_t> chain;
  std::vector<int32_t> cached;
  uint64_t parent = BlockAllocator::kRootHash;
  for (int64_t i = 0; i < max_blocks; ++i) {
    const auto piece = tokens.subspan(static_cast<size_t>(i * block), static_cast<size_t>(block));
    cached.push_back(allocator_.find(parent, piece));
    parent = BlockAllocator::hash_block(parent, piece);
    chain.push_back(parent);
  }
  // Resuming at position k * block reads positions from k * block - window + 1 on: the longest
  // k whose blocks from there to k are all cached. Position-for-position those blocks hold
  // what this sequence would compute (their hashes cover every token before them).
  auto first_kept = [&](int64_t k) { return std::max<int64_t>(0, k * block - window_ + 1) / block; };
  int64_t k = max_blocks;
  for (; k > 0; --k) {
    bool all_cached = true;
    for (int64_t j = first_kept(k); j < k && all_cached; ++j) all_cached = cached[static_cast<size_t>(j)] >= 0;
    if (all_cached) break;
  }
  const int64_t covered = k * block + std::min(n_tokens - k * block, first_chunk);
  const int64_t needed = blocks_for(covered) - k;
  // Retained before the availability check, as assign() does: a revived cached block no longer
  // counts as available.
  sequence.table.assign(static_cast<size_t>(first_kept(k)), kDroppedBlock);
  for (int64_t j = first_kept(k); j < k; ++j) {
    allocator_.retain(cached[static_cast<size_t>(j)]);
    sequence.table.push_back(cached[static_cast<size_t>(j)]);
  }
  if (allocator_.n_available() < needed) {
    release(sequence);
    return -1;
  }
  sequence.hashes.assign(chain.begin(), chain.begin() + k);
  TANDEM_ASSERT(grow(sequence, covered));
  return k * block;
}

void BlockManager::drop_out_of_window(SequenceBlocks& sequence, int64_t n_computed) {
  if (window_ == 0) return;
  const int64_t first_read = n_computed - window_ + 1;
  const auto droppable =
      std::min<int64_t>(std::max<int64_t>(0, first_read) / block_size(), static_cast<int64_t>(sequence.table.size()));
  for (int64_t b = 0; b < droppable; ++b) {
    int32_t& entry = sequence.table[static_cast<size_t>(b)];
    if (entry == kDroppedBlock) continue;
    allocator_.release(entry);
    entry = kDroppedBlock;
  }
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
    if (sequence.table.back() != kDroppedBlock) allocator_.release(sequence.table.back());
    sequence.table.pop_back();
  }
}

bool BlockManager::writable_from(const SequenceBlocks& sequence, int64_t from_position) const {
  for (auto i = static_cast<size_t>(from_position / block_size()); i < sequence.table.size(); ++i) {
    const int32_t block = sequence.table[i];
    if (block == kDroppedBlock) return false;
    if (allocator_.ref_count(block) != 1 || allocator_.is_published(block)) return false;
  }
  return true;
}

void BlockManager::release(SequenceBlocks& sequence) {
  for (auto it = sequence.table.rbegin(); it != sequence.table.rend(); ++it)
    if (*it != kDroppedBlock) allocator_.release(*it);
  sequence.table.clear();
  sequence.hashes.clear();
}

int64_t BlockManager::cached_prefix_blocks(std::span<const int32_t> tokens, int64_t max_blocks) const {
  const int32_t size = block_size();
  uint64_t parent = BlockAllocator::kRootHash;
  int64_t n = 0;
  for (; n < max_blocks && (n + 1) * size <= static_cast<int64_t>(tokens.size()); ++n) {
    const std::span<const int32_t> block = tokens.subspan(static_cast<size_t>(n * size), static_cast<size_t>(size));
    if (allocator_.find(parent, block) < 0) break;
    parent = BlockAllocator::hash_block(parent, block);
  }
  return n;
}

}  // namespace tandem
