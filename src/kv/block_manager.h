// BlockManager: the one owner of which KV blocks each sequence holds. A sequence's blocks
// (its block table and the hashes of its full blocks) live in a SequenceBlocks beside the
// request, but only this class changes them: admission with prefix reuse, growth as tokens
// are added, publication of computed full blocks to the prefix cache, and release. Built on
// the BlockAllocator (free list, reference counts, prefix cache); knows nothing of models,
// requests or scheduling policy. For a model whose every layer attends within a sliding
// window it also drops the blocks a sequence's next positions can no longer see, and matches
// cached prefixes needing only the blocks inside the window of the position it resumes at.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_allocator.h"

namespace tandem {

// The table entry of a block a sliding-window sequence dropped: its positions lie before the
// window of every position still to compute, so nothing reads them again.
constexpr int32_t kDroppedBlock = -1;

// The blocks one sequence holds. Read it freely (the forward pass reads `table` through the
// Batch); change it only through BlockManager.
struct SequenceBlocks {
  std::vector<int32_t> table;    // block of each block_size positions, or kDroppedBlock
  std::vector<uint64_t> hashes;  // hashes of the leading full blocks, published or matched

  bool empty() const { return table.empty(); }
  // Entries that are blocks (not dropped): what the sequence occupies in the pool.
  int64_t n_held() const {
    int64_t held = 0;
    for (int32_t block : table) held += block != kDroppedBlock ? 1 : 0;
    return held;
  }
};

class BlockManager {
 public:
  // window: the model's KvConfig::kv_window() (positions further behind than this are never
  // read again); 0 keeps every block of a sequence until it ends.
  BlockManager(int64_t n_blocks, int32_t block_size, int64_t window = 0)
      : allocator_(n_blocks, block_size), window_(window) {}

  int64_t window() const { return window_; }
  int32_t block_size() const { return allocator_.block_size(); }
  int64_t n_blocks() const { return allocator_.n_blocks(); }
  int64_t blocks_for(int64_t n_tokens) const { return (n_tokens + block_size() - 1) / block_size(); }
  BlockStats stats() const { return allocator_.stats(); }
  int32_t ref_count(int32_t block) const { return allocator_.ref_count(block); }

  // Gives an empty `sequence` blocks for all of `tokens`, reusing the longest cached prefix
  // of full blocks (never the block of the last token, whose logits must be computed). With a
  // window, a prefix of k blocks is reused when the blocks within the window of position
  // k * block_size are cached (earlier ones may have been evicted: they enter as dropped).
  // Returns how many leading tokens already have their K/V (a multiple of block_size), or
  // -1, holding nothing, when the pool cannot take the rest. reuse_prefix false: no cached
  // block is reused (all of `tokens` will be computed).
  // first_chunk (with a window only): blocks are given for no more than that many positions
  // after the reused prefix, the first prefill chunk; the caller grows the table chunk by
  // chunk and drops what falls behind the window, so a long prompt never holds more than its
  // window and a chunk. Without a window every block is needed by the prompt's end anyway, and
  // taking them all at admission leaves admission the only place a prompt can be refused.
  int64_t assign(SequenceBlocks& sequence, std::span<const int32_t> tokens, bool reuse_prefix = true,
                 int64_t first_chunk = INT64_MAX);
  // Grows the table to cover n_tokens positions; false if the pool ran dry (the blocks
  // taken so far stay with the sequence).
  bool grow(SequenceBlocks& sequence, int64_t n_tokens);
  // Publishes the full blocks among the first n_computed positions (their K/V now written)
  // to the prefix cache; `tokens` are the sequence's tokens.
  void publish_computed(SequenceBlocks& sequence, std::span<const int32_t> tokens, int64_t n_computed);
  // With a window: releases the blocks wholly before the window of position n_computed (the
  // next to compute), leaving kDroppedBlock in their entries. Published ones stay in the prefix
  // cache (their K/V is still that prefix's); nothing else changes. No-op without a window.
  void drop_out_of_window(SequenceBlocks& sequence, int64_t n_computed);
  // Shrinks the table to cover n_tokens positions, returning the blocks past them (last
  // first): a speculative step wrote K/V for proposed positions that were then rejected.
  // Only private tail blocks can go: the published (and matched) leading blocks all lie
  // within the computed positions, which a caller never truncates into (asserted).
  void truncate(SequenceBlocks& sequence, int64_t n_tokens);
  // True when every block holding positions >= from_position is this sequence's alone
  // (one reference, not published): K/V may be written there without touching another
  // sequence's or the prefix cache's. The engine asserts it before a speculative write.
  bool writable_from(const SequenceBlocks& sequence, int64_t from_position) const;
  // Returns every block (last first, so that with equal LRU age a prefix's head outlives
  // its tail) and empties the sequence.
  void release(SequenceBlocks& sequence);

  // How many leading full blocks of `tokens` (at most max_blocks) the prefix cache holds now;
  // holds nothing (disaggregated serving asks another process for the blocks after them).
  int64_t cached_prefix_blocks(std::span<const int32_t> tokens, int64_t max_blocks) const;

  // Hit-ratio bookkeeping, once per request: prompt tokens looked up, tokens served from cache.
  void count_lookup(int64_t prompt_tokens, int64_t hit_tokens) { allocator_.count_lookup(prompt_tokens, hit_tokens); }

 private:
  int64_t assign_windowed(SequenceBlocks& sequence, std::span<const int32_t> tokens, int64_t first_chunk);

  BlockAllocator allocator_;
  int64_t window_ = 0;
};

}  // namespace tandem
