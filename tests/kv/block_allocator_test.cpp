// BlockAllocator: free list, reference counts, prefix hashing of full blocks, LRU eviction
// of unreferenced cached blocks — and KvCache::map_blocks deriving slot tables from blocks.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/block_allocator.h"
#include "kv/kv_cache.h"

namespace tandem {
namespace {

std::vector<int32_t> iota_tokens(int32_t first, int32_t n) {
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  std::iota(tokens.begin(), tokens.end(), first);
  return tokens;
}

TEST(BlockAllocator, AllocatesEveryBlockOnceThenReportsCapacity) {
  BlockAllocator blocks(4, 16);
  std::vector<int32_t> got;
  for (int i = 0; i < 4; ++i) got.push_back(blocks.allocate());
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(blocks.allocate(), -1);  // capacity, not an error
  EXPECT_EQ(blocks.stats().used, 4);
  for (int32_t b : got) blocks.release(b);
  const BlockStats s = blocks.stats();
  EXPECT_EQ(s.free, 4);
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.cached, 0);
}

TEST(BlockAllocator, RefCountsKeepSharedBlocksAlive) {
  BlockAllocator blocks(2, 4);
  const int32_t b = blocks.allocate();
  blocks.publish(b, BlockAllocator::kRootHash, iota_tokens(10, 4));
  blocks.retain(b);
  EXPECT_EQ(blocks.ref_count(b), 2);
  blocks.release(b);
  EXPECT_EQ(blocks.stats().used, 1);
  blocks.release(b);
  EXPECT_EQ(blocks.stats().used, 0);
  EXPECT_EQ(blocks.stats().cached, 1);  // hashed: kept for reuse, not freed
}

TEST(BlockAllocator, HashDependsOnParentAndEveryToken) {
  const std::vector<int32_t> a = iota_tokens(0, 16);
  std::vector<int32_t> b = a;
  b[15] = 99;
  const uint64_t h = BlockAllocator::hash_block(BlockAllocator::kRootHash, a);
  EXPECT_EQ(h, BlockAllocator::hash_block(BlockAllocator::kRootHash, a));
  EXPECT_NE(h, BlockAllocator::hash_block(BlockAllocator::kRootHash, b));
  EXPECT_NE(h, BlockAllocator::hash_block(h, a));  // same tokens, different prefix
}

TEST(BlockAllocator, MatchPrefixFindsLongestCachedChainOnly) {
  BlockAllocator blocks(8, 4);
  const std::vector<int32_t> prompt = iota_tokens(1, 14);  // 3 full blocks + 2
  std::vector<int32_t> table;
  uint64_t parent = BlockAllocator::kRootHash;
  for (int i = 0; i < 3; ++i) {
    const int32_t b = blocks.allocate();
    const std::span<const int32_t> piece(prompt.data() + i * 4, 4);
    blocks.publish(b, parent, piece);
    parent = BlockAllocator::hash_block(parent, piece);
    table.push_back(b);
  }
  for (int32_t b : table) blocks.release(b);
  EXPECT_EQ(blocks.stats().cached, 3);

  // Same first 8 tokens, different third block: two blocks hit.
  std::vector<int32_t> other = prompt;
  other[9] = 500;
  std::vector<uint64_t> hashes;
  std::vector<int32_t> hit = blocks.match_prefix(other, 100, hashes);
  EXPECT_EQ(hit, (std::vector<int32_t>{table[0], table[1]}));
  EXPECT_EQ(hashes.size(), 2u);
  EXPECT_EQ(blocks.stats().used, 2);
  EXPECT_EQ(blocks.stats().cached, 1);
  for (int32_t b : hit) blocks.release(b);

  // max_blocks caps the match (the scheduler keeps the last prompt token to compute).
  hashes.clear();
  hit = blocks.match_prefix(prompt, 1, hashes);
  EXPECT_EQ(hit.size(), 1u);
  for (int32_t b : hit) blocks.release(b);

  // A different first block misses everything, even though later blocks' tokens match.
  std::vector<int32_t> shifted = prompt;
  shifted[0] = 77;
  hashes.clear();
  EXPECT_TRUE(blocks.match_prefix(shifted, 100, hashes).empty());
}

TEST(BlockAllocator, EvictsLeastRecentlyUsedCachedBlockWhenFreeListIsEmpty) {
  BlockAllocator blocks(3, 2);
  std::vector<int32_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(blocks.allocate());
    blocks.publish(ids.back(), BlockAllocator::kRootHash, iota_tokens(10 * i, 2));
  }
  // Released in the order 1, 0, 2: block 1 is least recently used.
  blocks.release(ids[1]);
  blocks.release(ids[0]);
  blocks.release(ids[2]);
  EXPECT_EQ(blocks.stats().cached, 3);
  EXPECT_EQ(blocks.n_available(), 3);
  // Touching block 1 again (a hit) makes block 0 the oldest.
  EXPECT_EQ(blocks.lookup(BlockAllocator::kRootHash, iota_tokens(10, 2)), ids[1]);
  blocks.release(ids[1]);
  EXPECT_EQ(blocks.allocate(), ids[0]);
  EXPECT_EQ(blocks.lookup(BlockAllocator::kRootHash, iota_tokens(0, 2)), -1);  // evicted: forgotten
  EXPECT_EQ(blocks.lookup(BlockAllocator::kRootHash, iota_tokens(20, 2)), ids[2]);
  blocks.release(ids[2]);
}

TEST(BlockAllocator, DuplicatePublishKeepsFirstCopyAndFreesTheOther) {
  BlockAllocator blocks(2, 2);
  const int32_t a = blocks.allocate(), b = blocks.allocate();
  blocks.publish(a, BlockAllocator::kRootHash, iota_tokens(5, 2));
  blocks.publish(b, BlockAllocator::kRootHash, iota_tokens(5, 2));
  blocks.release(a);
  blocks.release(b);
  const BlockStats s = blocks.stats();
  EXPECT_EQ(s.cached, 1);
  EXPECT_EQ(s.free, 1);
}

TEST(KvCachePaged, SlotsFollowBlockTables) {
  const KvShape shape{/*n_layers=*/1, /*n_kv_heads=*/1, /*head_dim=*/2};
  KvCache cache(shape, 4, 8);
  EXPECT_EQ(cache.n_slots(), 32);
  const std::vector<int32_t> table = {3, 1};
  EXPECT_EQ(cache.slot(table, 0), 24);
  EXPECT_EQ(cache.slot(table, 7), 31);
  EXPECT_EQ(cache.slot(table, 8), 8);
  EXPECT_EQ(cache.slot(table, 10), 10);
  EXPECT_EQ(cache.whole_pool_blocks(), (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(cache.bytes_per_block(), 8 * cache.bytes_per_token());
}

}  // namespace
}  // namespace tandem
