// KV block messages without MPI: packed from one KvCache and applied into another, every
// layer's rows arrive byte for byte, for each stored type and for partly filled blocks; a
// message from another shape, type, block size or version, or a cut or altered one, is
// refused with one line before anything is written.
#include "kv/kv_block_message.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "dist/random_kv_cache.h"
#include "kv/block_allocator.h"

namespace tandem {
namespace {

constexpr int32_t kBlockSize = 16;
constexpr int64_t kBlocks = 4;

std::vector<int32_t> token_ids(int32_t first, int32_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

// The message's one-line error, or "" when it is accepted.
std::string refusal(std::span<const uint8_t> message, const KvCache& cache) {
  try {
    read_kv_block_info(message, cache);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

void expect_refused(std::span<const uint8_t> message, const KvCache& cache, const std::string& names) {
  const std::string error = refusal(message, cache);
  EXPECT_NE(error.find(names), std::string::npos) << "error: '" << error << "', expected it to name " << names;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
}

class KvBlockRoundTrip : public ::testing::TestWithParam<KvTypes> {};

TEST_P(KvBlockRoundTrip, EveryLayersRowsArriveByteForByte) {
  KvCache sender(test::small_kv_shape(), kBlocks, kBlockSize, GetParam());
  test::fill_random(sender, 7);
  std::vector<uint8_t> message;
  // A full block, partly filled last blocks, and a single position.
  for (int32_t n_filled : {kBlockSize, kBlockSize - 1, 5, 1}) {
    SCOPED_TRACE("n_filled " + std::to_string(n_filled));
    KvCache receiver(test::small_kv_shape(), kBlocks, kBlockSize, GetParam());
    const int32_t from_block = 2;
    const int32_t to_block = 1;
    const std::vector<int32_t> tokens = token_ids(100, n_filled);
    const uint64_t parent = BlockAllocator::hash_block(BlockAllocator::kRootHash, token_ids(1, kBlockSize));
    pack_kv_block(sender, from_block, 1, parent, tokens, message);
    EXPECT_EQ(static_cast<int64_t>(message.size()), kv_block_message_bytes(sender, n_filled));

    const KvBlockInfo info = apply_kv_block(message, receiver, to_block);
    EXPECT_EQ(info.block_index, 1);
    EXPECT_EQ(info.tokens, tokens);
    EXPECT_EQ(info.parent_hash, parent);
    EXPECT_EQ(info.prefix_hash, n_filled == kBlockSize ? BlockAllocator::hash_block(parent, tokens) : kNoPrefixHash);
    for (int32_t i = 0; i < kBlockSize; ++i) {
      const int64_t to_slot = to_block * kBlockSize + i;
      if (i < n_filled) {
        EXPECT_TRUE(test::same_slot_bytes(sender, from_block * kBlockSize + i, receiver, to_slot)) << "slot " << i;
      } else {
        EXPECT_TRUE(test::slot_is_zero(receiver, to_slot)) << "unfilled slot " << i << " was written";
      }
    }
    for (int32_t block : {0, 2, 3})
      for (int32_t i = 0; i < kBlockSize; ++i)
        EXPECT_TRUE(test::slot_is_zero(receiver, block * kBlockSize + i)) << "block " << block << " was written";
  }
}

INSTANTIATE_TEST_SUITE_P(StoredTypes, KvBlockRoundTrip,
                         ::testing::Values(KvTypes{DType::F16, DType::F16}, KvTypes{DType::BF16, DType::BF16},
                                           KvTypes{DType::Q8_0, DType::Q8_0}, KvTypes{DType::Q4_0, DType::Q4_0},
                                           KvTypes{DType::F32, DType::F32}, KvTypes{DType::Q8_0, DType::F16}),
                         [](const auto& info) {
                           return std::string(kv_type_name(info.param.k)) + "_" +
                                  std::string(kv_type_name(info.param.v));
                         });

class KvBlockRefusal : public ::testing::Test {
 protected:
  void SetUp() override {
    test::fill_random(sender_, 11);
    pack_kv_block(sender_, 0, 0, BlockAllocator::kRootHash, token_ids(5, kBlockSize), message_);
    ASSERT_EQ(refusal(message_, sender_), "");
  }
  // A copy of the message with a 32-bit field at byte `offset` replaced.
  std::vector<uint8_t> with_u32(size_t offset, uint32_t value) const {
    std::vector<uint8_t> copy = message_;
    std::memcpy(copy.data() + offset, &value, sizeof(value));
    return copy;
  }

  KvCache sender_{test::small_kv_shape(), kBlocks, kBlockSize, KvTypes{DType::Q8_0, DType::F16}};
  std::vector<uint8_t> message_;
};

TEST_F(KvBlockRefusal, AnotherShapeIsRefused) {
  KvShape more_layers = test::small_kv_shape();
  more_layers.n_layers += 1;
  expect_refused(message_, KvCache(more_layers, kBlocks, kBlockSize, sender_.types()), "layers");
  // Same K/V width, split into other heads: another model.
  KvShape other_heads = test::small_kv_shape();
  other_heads.n_kv_heads *= 2;
  other_heads.head_dim /= 2;
  expect_refused(message_, KvCache(other_heads, kBlocks, kBlockSize, sender_.types()), "KV heads");
}

TEST_F(KvBlockRefusal, AnotherTypeOrBlockSizeIsRefused) {
  expect_refused(message_, KvCache(test::small_kv_shape(), kBlocks, kBlockSize, KvTypes{DType::Q8_0, DType::Q8_0}),
                 "K q8_0, V f16");
  expect_refused(message_, KvCache(test::small_kv_shape(), kBlocks, kBlockSize, KvTypes{DType::Q4_0, DType::F16}),
                 "this cache stores K q4_0");
  expect_refused(message_, KvCache(test::small_kv_shape(), kBlocks * 2, kBlockSize / 2, sender_.types()),
                 "blocks of 16 positions");
  // A type id no build knows.
  expect_refused(with_u32(40, 9999), sender_, "type id 9999");
}

TEST_F(KvBlockRefusal, AnotherVersionOrMagicIsRefused) {
  expect_refused(with_u32(4, 2), sender_, "version 2");
  std::vector<uint8_t> not_ours = message_;
  not_ours[0] = 'X';
  expect_refused(not_ours, sender_, "not a KV block message");
}

TEST_F(KvBlockRefusal, EveryTruncationAndAnExtraByteAreRefused) {
  // Every shorter length, the empty buffer included, read from a copy of exactly that size
  // (so that under AddressSanitizer any read past it is reported).
  for (size_t length = 0; length < message_.size(); ++length) {
    const std::vector<uint8_t> cut(message_.begin(), message_.begin() + static_cast<std::ptrdiff_t>(length));
    const std::string error = refusal(cut, sender_);
    ASSERT_NE(error, "") << "a message cut to " << length << " bytes was accepted";
    ASSERT_EQ(error.find('\n'), std::string::npos) << error;
  }
  std::vector<uint8_t> longer = message_;
  longer.push_back(0);
  expect_refused(longer, sender_, "header describes");
}

TEST_F(KvBlockRefusal, FillCountOutsideTheBlockIsRefused) {
  expect_refused(with_u32(36, 0), sender_, "fills 0 positions");
  expect_refused(with_u32(36, kBlockSize + 1), sender_, "fills 17 positions");
  expect_refused(with_u32(36, 0x80000000u), sender_, "positions");
}

TEST_F(KvBlockRefusal, PrefixHashThatDoesNotFollowFromTheTokensIsRefused) {
  std::vector<uint8_t> altered = message_;
  altered[72] ^= 1;  // the first token id
  expect_refused(altered, sender_, "prefix hash");
  altered = message_;
  altered[56] ^= 1;  // the parent hash
  expect_refused(altered, sender_, "prefix hash");
}

TEST_F(KvBlockRefusal, RefusedMessageWritesNothing) {
  KvCache receiver(test::small_kv_shape(), kBlocks, kBlockSize, sender_.types());
  std::vector<uint8_t> cut(message_.begin(), message_.end() - 1);
  EXPECT_THROW(apply_kv_block(cut, receiver, 0), InputError);
  for (int32_t i = 0; i < kBlockSize; ++i) EXPECT_TRUE(test::slot_is_zero(receiver, i));
}

}  // namespace
}  // namespace tandem
