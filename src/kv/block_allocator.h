// BlockAllocator: the KV pool as fixed-size blocks of `block_size` token slots — a free list,
// reference counts, and a prefix cache of full blocks keyed by hash(parent hash, token ids).
// Unreferenced cached blocks stay reusable until memory is needed, then go least-recently-
// used first. Plain bookkeeping: it never touches K/V storage and knows nothing of models.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace tandem {

struct BlockStats {
  int64_t total = 0;          // blocks in the pool
  int64_t used = 0;           // referenced by at least one sequence
  int64_t cached = 0;         // unreferenced but holding a reusable full prefix block
  int64_t free = 0;           // holding nothing
  int64_t lookup_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t hit_tokens = 0;     // of those, served from cached blocks
};

class BlockAllocator {
 public:
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;  // "parent" of a sequence's first block

  BlockAllocator(int64_t n_blocks, int32_t block_size);

  int32_t block_size() const { return block_size_; }
  int64_t n_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  // Blocks allocate() can hand out now: free ones plus evictable cached ones.
  int64_t n_available() const { return static_cast<int64_t>(free_.size() + lru_.size()); }
  BlockStats stats() const;

  // A block with ref count 1, or -1 when none is free or evictable (a capacity outcome).
  // Takes a free block first; otherwise evicts the least recently used cached block.
  int32_t allocate();
  void retain(int32_t block);
  // Drops one reference; at zero a hashed block becomes cached (most recently used), an
  // unhashed one free.
  void release(int32_t block);

  // Hash of a full block: mixes the parent's hash with the block's token ids, so equal
  // hashes mean equal whole prefixes (up to 64-bit collisions, which lookup() rules out).
  static uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> tokens);

  // Marks `block` (referenced, its K/V computed) as the full block `tokens` after parent
  // `parent_hash`. If another block already holds that prefix this one stays unhashed.
  void publish(int32_t block, uint64_t parent_hash, std::span<const int32_t> tokens);

  // The cached block for (parent_hash, tokens), retained for the caller, or -1.
  int32_t lookup(uint64_t parent_hash, std::span<const int32_t> tokens);
  // The same without retaining it (the caller retains what it decides to keep).
  int32_t find(uint64_t parent_hash, std::span<const int32_t> tokens) const;

  // The longest cached prefix of `tokens`, at most max_blocks full blocks: retained blocks in
  // order, their hashes appended to `hashes`.
  std::vector<int32_t> match_prefix(std::span<const int32_t> tokens, int64_t max_blocks, std::vector<uint64_t>& hashes);
  // Hit-ratio bookkeeping, once per request: prompt tokens looked up, tokens served from cache.
  void count_lookup(int64_t prompt_tokens, int64_t hit_tokens) {
    lookup_tokens_ += prompt_tokens;
    hit_tokens_ += hit_tokens;
  }

  int32_t ref_count(int32_t block) const { return blocks_[static_cast<size_t>(block)].refs; }
  // Holds a published prefix (its K/V must never change while it is).
  bool is_published(int32_t block) const { return blocks_[static_cast<size_t>(block)].hashed; }

 private:
  struct Block {
    int32_t refs = 0;
    bool hashed = false;
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int32_t> tokens;          // [block_size] when hashed: verifies lookups
    std::list<int32_t>::iterator lru_it;  // valid while cached (hashed, refs == 0)
  };

  void check_block(int32_t block) const;

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                      // a stack; lowest id on top
  std::list<int32_t> lru_;                         // cached blocks, least recently used first
  std::unordered_map<uint64_t, int32_t> by_hash_;  // hash -> block
  int64_t lookup_tokens_ = 0;
  int64_t hit_tokens_ = 0;
};

}  // namespace tandem
