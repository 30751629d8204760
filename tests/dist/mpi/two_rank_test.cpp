// Two ranks under mpirun (cmake/mpi_tests.cmake): rank 1 fills a KV cache with seeded random
// rows and sends its blocks non-blocking; rank 0 receives each message of unknown size,
// applies it into its own cache at blocks of its choosing, and compares byte for byte with
// the same seeded fill. Also: probe-then-receive of sizes the receiver does not know, and
// MPI's failures as MpiError carrying MPI's error string. Every test runs on both ranks, in
// the same order, each doing its side; a barrier ends each so that the next starts together.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/mpi_error.h"
#include "dist/mpi_session.h"
#include "dist/random_kv_cache.h"
#include "kv/block_allocator.h"
#include "kv/kv_block_message.h"

namespace tandem {
namespace {

// Set by main for the tests (the one MPI session of the process).
Communicator* world = nullptr;

// Tags, one per kind of message, so that a message of one test never matches another's.
constexpr int kKvBlockTag = 1;
constexpr int kSizedTag = 2;
constexpr int kAnySizeTag = 3;
constexpr int kTruncatedTag = 4;

// The thrown MpiError's text, or "" when nothing is thrown.
template <typename Call>
std::string mpi_error_of(Call call) {
  try {
    call();
  } catch (const MpiError& error) {
    return error.what();
  }
  return "";
}

class TwoRanks : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(world->size(), 2) << "run with mpirun -np 2"; }
  void TearDown() override { world->barrier(); }
};

TEST_F(TwoRanks, KvBlocksSentNonBlockingArriveByteForByte) {
  constexpr int32_t kBlockSize = 16;
  constexpr int64_t kBlocks = 8;
  const KvTypes types{DType::Q8_0, DType::F16};
  constexpr uint32_t kSeed = 2026;
  // A sequence of 4 full blocks and a partly filled fifth: 71 positions, sender blocks 1..5.
  std::vector<int32_t> tokens(4 * kBlockSize + 7);
  std::iota(tokens.begin(), tokens.end(), 300);
  const std::vector<int32_t> sender_table = {1, 2, 3, 4, 5};

  if (world->rank() == 1) {
    KvCache cache(test::small_kv_shape(), kBlocks, kBlockSize, types);
    test::fill_random(cache, kSeed);
    // One buffer per message in flight: each must stay unchanged until its send completes.
    std::vector<std::vector<uint8_t>> messages(sender_table.size());
    std::vector<MpiRequest> sends;
    uint64_t parent = BlockAllocator::kRootHash;
    for (size_t b = 0; b < sender_table.size(); ++b) {
      const size_t first = b * kBlockSize;
      const size_t n = std::min<size_t>(kBlockSize, tokens.size() - first);
      const std::span<const int32_t> piece(tokens.data() + first, n);
      pack_kv_block(cache, sender_table[b], static_cast<int64_t>(b), parent, piece, messages[b]);
      sends.push_back(world->send_async(0, kKvBlockTag, messages[b]));
      if (n == kBlockSize) parent = BlockAllocator::hash_block(parent, piece);
    }
    for (size_t b = 0; b < sends.size(); ++b)
      EXPECT_EQ(sends[b].wait().bytes, static_cast<int64_t>(messages[b].size()));
    return;
  }

  KvCache received(test::small_kv_shape(), kBlocks, kBlockSize, types);
  KvCache expected(test::small_kv_shape(), kBlocks, kBlockSize, types);
  test::fill_random(expected, kSeed);
  // The receiver's own blocks for the sequence, in another order than the sender's.
  const std::vector<int32_t> receiver_table = {6, 0, 7, 3, 2};
  std::vector<uint8_t> message;
  uint64_t parent = BlockAllocator::kRootHash;
  for (size_t b = 0; b < receiver_table.size(); ++b) {
    const MessageInfo arrived = world->receive_any_size(1, kKvBlockTag, message);
    EXPECT_EQ(arrived.source, 1);
    EXPECT_EQ(arrived.bytes, static_cast<int64_t>(message.size()));
    // Messages between one pair of ranks with one tag arrive in the order sent.
    const KvBlockInfo info = read_kv_block_info(message, received);
    ASSERT_EQ(info.block_index, static_cast<int64_t>(b));
    apply_kv_block(message, received, receiver_table[b]);
    const size_t first = b * kBlockSize;
    EXPECT_EQ(info.tokens, std::vector<int32_t>(tokens.begin() + static_cast<std::ptrdiff_t>(first),
                                                tokens.begin() + static_cast<std::ptrdiff_t>(first) + info.n_filled()));
    // The hashes chain as the sender's block manager would have published them.
    EXPECT_EQ(info.parent_hash, parent);
    if (info.n_filled() == kBlockSize) parent = info.prefix_hash;
    for (int32_t i = 0; i < info.n_filled(); ++i)
      EXPECT_TRUE(test::same_slot_bytes(expected, sender_table[b] * kBlockSize + i, received,
                                        receiver_table[b] * kBlockSize + i))
          << "block " << b << " slot " << i;
  }
}

TEST_F(TwoRanks, ProbeReceivesMessagesOfSizesTheReceiverDoesNotKnow) {
  const std::vector<size_t> sizes = {0, 1, 1000, 300000};  // 300 kB: past OpenMPI's eager limit
  if (world->rank() == 1) {
    for (size_t size : sizes) {
      std::vector<uint8_t> bytes(size);
      for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<uint8_t>(i * 31 + size);
      world->send(0, kAnySizeTag, bytes);
    }
    return;
  }
  std::vector<uint8_t> out;
  for (size_t size : sizes) {
    const MessageInfo info = world->receive_any_size(kAnySource, kAnyTag, out);
    EXPECT_EQ(info.source, 1);
    EXPECT_EQ(info.tag, kAnySizeTag);
    EXPECT_EQ(info.bytes, static_cast<int64_t>(size));
    ASSERT_EQ(out.size(), size);
    for (size_t i = 0; i < size; ++i) ASSERT_EQ(out[i], static_cast<uint8_t>(i * 31 + size)) << "byte " << i;
  }
  // Nothing else is waiting.
  EXPECT_FALSE(world->try_receive_any_size(kAnySource, kAnyTag, out).has_value());
}

TEST_F(TwoRanks, NonBlockingReceiveOfAKnownSizeCompletesUnderTest) {
  std::vector<uint8_t> bytes(4096);
  if (world->rank() == 1) {
    std::iota(bytes.begin(), bytes.end(), uint8_t{0});
    world->send(0, kSizedTag, bytes);
    return;
  }
  MpiRequest receive = world->receive_async(1, kSizedTag, bytes);
  std::optional<MessageInfo> done;
  while (!(done = receive.test())) {
  }
  EXPECT_FALSE(receive.pending());
  EXPECT_EQ(done->source, 1);
  EXPECT_EQ(done->bytes, 4096);
  for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(bytes[i], static_cast<uint8_t>(i));
}

TEST_F(TwoRanks, MpiFailuresCarryMpisErrorString) {
  // A rank that does not exist: MPI's own error, returned (not fatal) and thrown.
  const std::vector<uint8_t> bytes(16, 1);
  const std::string no_rank = mpi_error_of([&] { world->send(world->size(), kSizedTag, bytes); });
  EXPECT_EQ(no_rank, "MPI_Send: " + mpi_error_string(MPI_ERR_RANK));
  EXPECT_NE(mpi_error_string(MPI_ERR_RANK), "");

  // A message larger than the buffer: MPI_ERR_TRUNCATE; smaller: refused by the size check.
  if (world->rank() == 1) {
    world->send(0, kTruncatedTag, bytes);
    world->send(0, kTruncatedTag, bytes);
    return;
  }
  std::vector<uint8_t> small(8);
  const std::string truncated = mpi_error_of([&] { world->receive(1, kTruncatedTag, small); });
  EXPECT_EQ(truncated, "MPI_Recv: " + mpi_error_string(MPI_ERR_TRUNCATE));
  std::vector<uint8_t> large(32);
  const std::string short_message = mpi_error_of([&] { world->receive(1, kTruncatedTag, large); });
  EXPECT_NE(short_message.find("a message of 16 bytes into a buffer of 32"), std::string::npos) << short_message;
}

TEST_F(TwoRanks, PendingReceiveIsCancelledWhenDropped) {
  // Nobody sends on this tag: the request's destructor cancels it instead of waiting forever.
  std::vector<uint8_t> bytes(8);
  {
    MpiRequest never = world->receive_async(1 - world->rank(), 99, bytes);
    EXPECT_TRUE(never.pending());
  }
  SUCCEED();
}

}  // namespace
}  // namespace tandem

// Under AddressSanitizer (make asan), no leak check for this program: OpenMPI's plugins,
// loaded and unloaded at run time (so that no suppression can name their frames), keep
// allocations past MPI_Finalize that LeakSanitizer reports. dist's own code is checked for
// leaks by test_dist, which runs without MPI. A no-op without the sanitizer.
extern "C" int __lsan_is_turned_off() { return 1; }

int main(int argc, char** argv) {
  tandem::MpiSession session(&argc, &argv);
  tandem::Communicator communicator(session);
  tandem::world = &communicator;
  // Rank 0 reports in full; rank 1 prints only its failures, so that the log reads once.
  // (Before InitGoogleTest, which picks the printer.)
  if (communicator.rank() != 0) GTEST_FLAG_SET(brief, true);
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  tandem::world = nullptr;
  return status;
}
