// BlockAllocator bookkeeping (see block_allocator.h). Every block is in exactly one of three
// places: the free stack (refs 0, unhashed), the LRU list (refs 0, hashed) or in use (refs > 0).
#include "kv/block_allocator.h"

#include <algorithm>

#include "base/error.h"

namespace tandem {

BlockAllocator::BlockAllocator(int64_t n_blocks, int32_t block_size)
    : block_size_(block_size), blocks_(static_cast<size_t>(n_blocks)) {
  TANDEM_ASSERT(n_blocks > 0 && block_size > 0);
  free_.reserve(static_cast<size_t>(n_blocks));
  for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(static_cast<int32_t>(b));
  by_hash_.reserve(static_cast<size_t>(n_blocks));
}

void BlockAllocator::check_block(int32_t block) const { TANDEM_ASSERT(block >= 0 && block < n_blocks()); }

BlockStats BlockAllocator::stats() const {
  BlockStats s;
  s.total = n_blocks();
  s.free = static_cast<int64_t>(free_.size());
  s.cached = static_cast<int64_t>(lru_.size());
  s.used = s.total - s.free - s.cached;
  s.lookup_tokens = lookup_tokens_;
  s.hit_tokens = hit_tokens_;
  return s;
}

int32_t BlockAllocator::allocate() {
  int32_t block = -1;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    // Evict: the block forgets its prefix, so a later lookup of it misses.
    block = lru_.front();
    lru_.pop_front();
    Block& b = blocks_[static_cast<size_t>(block)];
    by_hash_.erase(b.hash);
    b.hashed = false;
    b.tokens.clear();
  } else {
    return -1;
  }
  blocks_[static_cast<size_t>(block)].refs = 1;
  return block;
}

void BlockAllocator::retain(int32_t block) {
  check_block(block);
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.refs == 0) {
    TANDEM_ASSERT(b.hashed);  // only cached blocks can be revived; free ones come from allocate()
    lru_.erase(b.lru_it);
  }
  ++b.refs;
}

void BlockAllocator::release(int32_t block) {
  check_block(block);
  Block& b = blocks_[static_cast<size_t>(block)];
  TANDEM_ASSERT(b.refs > 0);
  if (--b.refs > 0) return;
  if (b.hashed) {
    b.lru_it = lru_.insert(lru_.end(), block);
  } else {
    free_.push_back(block);
  }
}

uint64_t BlockAllocator::hash_block(uint64_t parent_hash, std::span<const int32_t> tokens) {
  // splitmix64-style mixing per token: cheap, and every bit of every id reaches the result.
  uint64_t h = parent_hash ^ (0xbf58476d1ce4e5b9ull * (tokens.size() + 1));
  for (int32_t token : tokens) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(token)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
  }
  return h;
}

void BlockAllocator::publish(int32_t block, uint64_t parent_hash, std::span<const int32_t> tokens) {
  check_block(block);
  TANDEM_ASSERT(static_cast<int32_t>(tokens.size()) == block_size_);
  Block& b = blocks_[static_cast<size_t>(block)];
  TANDEM_ASSERT(b.refs > 0);
  if (b.hashed) return;
  const uint64_t hash = hash_block(parent_hash, tokens);
  // Two sequences may compute the same prefix at once; the first published copy is the one
  // later requests find, the other stays private and is freed with its sequence.
  if (!by_hash_.emplace(hash, block).second) return;
  b.hashed = true;
  b.hash = hash;
  b.parent_hash = parent_hash;
  b.tokens.assign(tokens.begin(), tokens.end());
}

int32_t BlockAllocator::find(uint64_t parent_hash, std::span<const int32_t> tokens) const {
  const auto it = by_hash_.find(hash_block(parent_hash, tokens));
  if (it == by_hash_.end()) return -1;
  const Block& b = blocks_[static_cast<size_t>(it->second)];
  // A 64-bit collision would silently serve another prompt's K/V: compare the real content.
  if (b.parent_hash != parent_hash || !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end()))
    return -1;
  return it->second;
}

int32_t BlockAllocator::lookup(uint64_t parent_hash, std::span<const int32_t> tokens) {
  const int32_t block = find(parent_hash, tokens);
  if (block >= 0) retain(block);
  return block;
}

std::vector<int32_t> BlockAllocator::match_prefix(std::span<const int32_t> tokens, int64_t max_blocks,
                                                  std::vector<uint64_t>& hashes) {
  std::vector<int32_t> matched;
  uint64_t parent = hashes.empty() ? kRootHash : hashes.back();
  const int64_t full_blocks = std::min<int64_t>(max_blocks, static_cast<int64_t>(tokens.size()) / block_size_);
  for (int64_t i = 0; i < full_blocks; ++i) {
    const auto piece = tokens.subspan(static_cast<size_t>(i * block_size_), static_cast<size_t>(block_size_));
    const int32_t block = lookup(parent, piece);
    if (block < 0) break;
    matched.push_back(block);
    parent = hash_block(parent, piece);
    hashes.push_back(parent);
  }
  return matched;
}

}  // namespace tandem
