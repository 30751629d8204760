// BlockManager with a sliding window (every layer of the model local): blocks wholly behind
// the window of the next position are dropped (back to the pool, published ones into the
// prefix cache), and a cached prefix is reused when the blocks inside the window of the
// position it resumes at are cached — earlier blocks may be gone — and never otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kv/block_manager.h"
#include "kv/kv_pool_plan.h"

namespace tandem {
namespace {

std::vector<int32_t> tokens_of(int32_t n, int32_t seed) {
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < n; ++i) tokens.push_back(seed * 1000 + i);
  return tokens;
}

TEST(SlidingWindowBlocks, DropsTheBlocksBehindTheWindow) {
  BlockManager blocks(16, 4, /*window=*/6);
  SequenceBlocks a;
  const std::vector<int32_t> prompt = tokens_of(20, 1);
  ASSERT_EQ(blocks.assign(a, prompt), 0);
  ASSERT_EQ(a.table.size(), 5u);
  const std::vector<int32_t> table = a.table;
  blocks.publish_computed(a, prompt, 20);
  // Position 20 reads 15..20: blocks 0-2 (positions 0..11) are behind it, block 3 (12..15) is not.
  blocks.drop_out_of_window(a, 20);
  EXPECT_EQ(a.table, (std::vector<int32_t>{kDroppedBlock, kDroppedBlock, kDroppedBlock, table[3], table[4]}));
  EXPECT_EQ(a.n_held(), 2);
  EXPECT_EQ(a.hashes.size(), 5u) << "the prefix hashes stay: later blocks chain from them";
  BlockStats s = blocks.stats();
  EXPECT_EQ(s.used, 2);
  EXPECT_EQ(s.cached, 3) << "dropped published blocks are still their prefix's K/V";
  blocks.drop_out_of_window(a, 20);  // idempotent
  EXPECT_EQ(blocks.stats().used, 2);
  blocks.release(a);
  s = blocks.stats();
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.cached, 5);
  EXPECT_EQ(s.free, 11);
}

TEST(SlidingWindowBlocks, NoWindowDropsNothing) {
  BlockManager blocks(16, 4);
  SequenceBlocks a;
  const std::vector<int32_t> prompt = tokens_of(20, 2);
  ASSERT_EQ(blocks.assign(a, prompt), 0);
  blocks.publish_computed(a, prompt, 20);
  blocks.drop_out_of_window(a, 20);
  EXPECT_EQ(a.n_held(), 5);
  blocks.release(a);
}

// A finished 20-token sequence left its 5 blocks cached; blocks 0 and 1 are then evicted. A
// new prompt extending it resumes at position 20, which reads 15..20: blocks 3 and 4 are all
// it needs, so 20 tokens are reused although the chain from block 0 is broken. Evicting block
// 3 too (inside that window) leaves no resumable point: nothing is reused.
TEST(SlidingWindowBlocks, PrefixNeedsOnlyTheBlocksInsideTheWindow) {
  for (bool evict_inside_window : {false, true}) {
    BlockManager blocks(8, 4, /*window=*/6);
    SequenceBlocks first;
    const std::vector<int32_t> prompt = tokens_of(20, 3);
    ASSERT_EQ(blocks.assign(first, prompt), 0);
    const std::vector<int32_t> first_table = first.table;
    blocks.publish_computed(first, prompt, 20);
    blocks.drop_out_of_window(first, 20);  // 0, 1, 2 cached first (oldest), in that order
    blocks.release(first);                 // then 4, 3
    // Take the 3 free blocks and evict the oldest cached ones: 0, 1 (and 2, 4, 3 for more).
    SequenceBlocks filler;
    const int32_t taken = evict_inside_window ? 3 + 5 : 3 + 2;
    ASSERT_EQ(blocks.assign(filler, tokens_of(taken * 4, 9)), 0);
    if (!evict_inside_window) {
      EXPECT_EQ(blocks.stats().cached, 3);
    }
    blocks.release(filler);  // unpublished: free again

    std::vector<int32_t> extended = prompt;
    for (int32_t i = 0; i < 5; ++i) extended.push_back(500 + i);
    SequenceBlocks again;
    const int64_t reused = blocks.assign(again, extended);
    if (evict_inside_window) {
      EXPECT_EQ(reused, 0) << "blocks inside the window were evicted";
      EXPECT_EQ(again.n_held(), 7);
    } else {
      EXPECT_EQ(reused, 20);
      ASSERT_EQ(again.table.size(), 7u);
      EXPECT_EQ(again.table[0], kDroppedBlock);
      EXPECT_EQ(again.table[2], kDroppedBlock) << "block 2 lies behind position 20's window: not retained";
      EXPECT_EQ(again.table[3], first_table[3]);
      EXPECT_EQ(again.table[4], first_table[4]);
      EXPECT_EQ(again.hashes.size(), 5u);
      EXPECT_EQ(blocks.ref_count(first_table[3]), 1);
    }
    blocks.release(again);
    EXPECT_EQ(blocks.stats().used, 0);
  }
}

// A prompt that is the cached one: never its last token's block, and the window's blocks
// before it must be there (here all are).
TEST(SlidingWindowBlocks, ResumesBeforeTheLastTokensBlock) {
  BlockManager blocks(16, 4, /*window=*/5);
  SequenceBlocks first;
  const std::vector<int32_t> prompt = tokens_of(16, 4);
  ASSERT_EQ(blocks.assign(first, prompt), 0);
  blocks.publish_computed(first, prompt, 16);
  blocks.release(first);
  SequenceBlocks again;
  EXPECT_EQ(blocks.assign(again, prompt), 12);  // block 3 holds the last token: recomputed
  // Position 12 reads 8..12: block 2 kept, blocks 0 and 1 enter dropped.
  EXPECT_EQ(again.table[0], kDroppedBlock);
  EXPECT_EQ(again.table[1], kDroppedBlock);
  EXPECT_NE(again.table[2], kDroppedBlock);
  EXPECT_EQ(again.n_held(), 2);
  blocks.release(again);
  EXPECT_EQ(blocks.stats().used, 0);
}

// With a window, assign() gives a long prompt blocks for its first chunk only (the caller grows
// the table as chunks go); without one, for the whole prompt.
TEST(SlidingWindowBlocks, AssignTakesTheFirstChunkOnly) {
  BlockManager windowed(16, 4, /*window=*/6), whole(16, 4);
  const std::vector<int32_t> prompt = tokens_of(40, 7);
  SequenceBlocks a, b;
  ASSERT_EQ(windowed.assign(a, prompt, true, /*first_chunk=*/6), 0);
  EXPECT_EQ(a.table.size(), 2u) << "positions 0..5";
  ASSERT_EQ(whole.assign(b, prompt, true, /*first_chunk=*/6), 0);
  EXPECT_EQ(b.table.size(), 10u);
  // Computing the next chunk: grow, then drop what fell behind the window.
  windowed.publish_computed(a, prompt, 6);
  windowed.drop_out_of_window(a, 6);
  ASSERT_TRUE(windowed.grow(a, 12));
  EXPECT_EQ(a.n_held(), 3);
  windowed.publish_computed(a, prompt, 12);
  windowed.drop_out_of_window(a, 12);  // position 12 reads 7..12: block 0 goes
  EXPECT_EQ(a.table[0], kDroppedBlock);
  EXPECT_EQ(a.n_held(), 2);
  windowed.release(a);
  whole.release(b);
}

// windowed_blocks_per_sequence against a count of the blocks each step actually spans: for
// every position a step can start at, the blocks from the window's first position to the
// step's last. The bound is reached, never passed.
TEST(SlidingWindowBlocks, BlocksPerSequenceIsTheMostAStepSpans) {
  for (int32_t block = 1; block <= 8; ++block)
    for (int64_t window = 1; window <= 20; ++window)
      for (int64_t step = 1; step <= 12; ++step) {
        int64_t most = 0;
        for (int64_t start = window; start < window + 3 * block; ++start) {
          const int64_t first_read = start - window + 1, last = start + step - 1;
          most = std::max(most, last / block - first_read / block + 1);
        }
        EXPECT_EQ(windowed_blocks_per_sequence(block, window, step), most)
            << "block " << block << " window " << window << " step " << step;
      }
}

// Assignment that cannot fit takes nothing, with or without revived blocks.
TEST(SlidingWindowBlocks, AssignFailsWhole) {
  BlockManager blocks(3, 4, /*window=*/4);
  SequenceBlocks a, b;
  ASSERT_EQ(blocks.assign(a, tokens_of(8, 5)), 0);
  EXPECT_EQ(blocks.assign(b, tokens_of(8, 6)), -1);
  EXPECT_TRUE(b.empty());
  EXPECT_TRUE(b.hashes.empty());
  EXPECT_EQ(blocks.stats().used, 2);
  blocks.release(a);
}

}  // namespace
}  // namespace tandem
