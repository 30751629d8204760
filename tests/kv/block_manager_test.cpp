// BlockManager: sequence-level block bookkeeping — prefix reuse on assignment, growth,
// publication of computed blocks, release — checked against the allocator's counts.
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_manager.h"

namespace tandem {
namespace {

std::vector<int32_t> tokens_of(int32_t n, int32_t seed) {
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < n; ++i) tokens.push_back(seed * 100 + i);
  return tokens;
}

TEST(BlockManager, AssignGrowPublishRelease) {
  BlockManager blocks(8, 4);
  SequenceBlocks a;
  const std::vector<int32_t> prompt = tokens_of(10, 1);
  EXPECT_EQ(blocks.assign(a, prompt), 0);  // nothing cached yet
  EXPECT_EQ(a.table.size(), 3u);           // 10 tokens in blocks of 4
  EXPECT_EQ(blocks.stats().used, 3);
  EXPECT_TRUE(blocks.grow(a, 13));
  EXPECT_EQ(a.table.size(), 4u);
  blocks.publish_computed(a, prompt, 10);  // two full blocks computed
  EXPECT_EQ(a.hashes.size(), 2u);
  blocks.release(a);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(a.hashes.empty());
  const BlockStats s = blocks.stats();
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.cached, 2);
  EXPECT_EQ(s.free, 6);
}

TEST(BlockManager, AssignReusesTheCachedPrefixButNeverTheLastTokensBlock) {
  BlockManager blocks(8, 4);
  SequenceBlocks first;
  const std::vector<int32_t> prompt = tokens_of(8, 2);
  ASSERT_EQ(blocks.assign(first, prompt), 0);
  blocks.publish_computed(first, prompt, 8);
  const std::vector<int32_t> first_table = first.table;
  blocks.release(first);

  SequenceBlocks again;  // the same 8 tokens: block 2 holds the last token, so only block 1 is reused
  EXPECT_EQ(blocks.assign(again, prompt), 4);
  ASSERT_EQ(again.table.size(), 2u);
  EXPECT_EQ(again.table[0], first_table[0]);
  EXPECT_EQ(again.hashes.size(), 1u);

  SequenceBlocks longer;  // 12 tokens sharing both full blocks: both reused while `again` holds one
  std::vector<int32_t> extended = prompt;
  for (int32_t i = 0; i < 4; ++i) extended.push_back(999 + i);
  EXPECT_EQ(blocks.assign(longer, extended), 8);
  EXPECT_EQ(longer.table[0], first_table[0]);
  EXPECT_EQ(longer.table[1], first_table[1]);
  EXPECT_EQ(blocks.ref_count(first_table[0]), 2);
  blocks.release(again);
  blocks.release(longer);
  EXPECT_EQ(blocks.stats().used, 0);
}

TEST(BlockManager, AssignFailsWholeAndGrowStopsWhenThePoolIsDry) {
  BlockManager blocks(3, 4);
  SequenceBlocks a, b;
  ASSERT_EQ(blocks.assign(a, tokens_of(8, 3)), 0);   // 2 of 3 blocks
  EXPECT_EQ(blocks.assign(b, tokens_of(8, 4)), -1);  // needs 2, 1 left: takes nothing
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(blocks.stats().used, 2);
  EXPECT_TRUE(blocks.grow(a, 12));
  EXPECT_FALSE(blocks.grow(a, 13));  // the pool is dry; what it had stays with `a`
  EXPECT_EQ(a.table.size(), 3u);
  blocks.release(a);
  EXPECT_EQ(blocks.stats().free, 3);
}

TEST(BlockManager, TruncateReturnsOnlyThePrivateTailBlocks) {
  // A speculative step grew a sequence sharing a cached prefix past its tokens; the rejected
  // positions' blocks go back, the shared and published ones stay referenced and intact.
  BlockManager blocks(8, 4);
  const std::vector<int32_t> prompt = tokens_of(9, 3);
  SequenceBlocks owner;
  ASSERT_EQ(blocks.assign(owner, prompt), 0);
  blocks.publish_computed(owner, prompt, 8);  // blocks 0 and 1 published
  SequenceBlocks sharer;
  ASSERT_EQ(blocks.assign(sharer, prompt), 8);  // shares both published blocks
  EXPECT_FALSE(blocks.writable_from(sharer, 0));
  EXPECT_FALSE(blocks.writable_from(sharer, 7));
  EXPECT_TRUE(blocks.writable_from(sharer, 8));  // block 2 is its own
  ASSERT_TRUE(blocks.grow(sharer, 9 + 8));       // 9 tokens + 8 proposed: 5 blocks
  EXPECT_EQ(sharer.table.size(), 5u);
  EXPECT_TRUE(blocks.writable_from(sharer, 9));
  const std::vector<int32_t> shared_head(sharer.table.begin(), sharer.table.begin() + 2);
  const int64_t used_before = blocks.stats().used;

  blocks.truncate(sharer, 10);  // 10 positions stay: blocks 0..2
  EXPECT_EQ(sharer.table.size(), 3u);
  EXPECT_EQ(blocks.stats().used, used_before - 2);
  EXPECT_EQ(sharer.hashes.size(), 2u);
  EXPECT_EQ(blocks.ref_count(shared_head[0]), 2);
  EXPECT_EQ(blocks.ref_count(shared_head[1]), 2);
  blocks.truncate(sharer, 12);  // already within its table: nothing changes
  EXPECT_EQ(sharer.table.size(), 3u);

  blocks.release(sharer);
  blocks.release(owner);
  EXPECT_EQ(blocks.stats().used, 0);
  EXPECT_EQ(blocks.stats().cached, 2);  // the published prefix survives for the next request
}

}  // namespace
}  // namespace tandem
