// Pipeline messages (dist/pipeline_messages.h): round trips of every kind, field for field and
// the hidden states and logits bit for bit; a receiver refuses a wrong magic or version, any
// truncation or extra byte, another d_model, out-of-range sequence ids, and logits that are not
// the step, micro-batch or size it waits for; stage timings and clock pings round-trip, and
// timings out of order are refused.
#include "dist/pipeline_messages.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "base/error.h"

namespace tandem {
namespace {

constexpr int64_t kDModel = 8;

Batch two_sequences() {
  Batch batch;
  const int32_t a = batch.add_sequence(std::vector<int32_t>{4, 9, 2});
  const int32_t b = batch.add_sequence(std::vector<int32_t>{7});
  for (int32_t i = 0; i < 5; ++i) batch.add(100 + i, 30 + i, a, i == 4);
  batch.add(55, 3, b, true);
  return batch;
}

const std::vector<StageTiming> kTimings = {
    {.rank = 1, .received_ns = 1000, .start_ns = 1200, .end_ns = 9000, .bytes_in = 4242},
    {.rank = 2, .received_ns = -5000, .start_ns = -4000, .end_ns = 7, .bytes_in = 17},  // another clock
};

std::vector<float> random_rows(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> rows(static_cast<size_t>(n));
  for (float& x : rows) x = normal(rng);
  return rows;
}

TEST(PipelineMessages, ActivationsRoundTrip) {
  const Batch batch = two_sequences();
  const std::vector<float> hidden = random_rows(batch.n_tokens() * kDModel, 3);
  std::vector<uint8_t> bytes;
  pack_activations(7, 1, batch, hidden, kDModel, kTimings, bytes);
  ActivationsMessage got;
  unpack_activations(bytes, kDModel, got);
  EXPECT_FALSE(got.stop);
  EXPECT_EQ(got.step, 7u);
  EXPECT_EQ(got.micro_batch, 1);
  EXPECT_EQ(got.batch.tokens, batch.tokens);
  EXPECT_EQ(got.batch.positions, batch.positions);
  EXPECT_EQ(got.batch.seq_ids, batch.seq_ids);
  EXPECT_EQ(got.batch.wants_logits, batch.wants_logits);
  EXPECT_EQ(got.batch.block_tables, batch.block_tables);
  ASSERT_EQ(got.hidden.size(), hidden.size());
  EXPECT_EQ(std::memcmp(got.hidden.data(), hidden.data(), hidden.size() * sizeof(float)), 0);
  EXPECT_EQ(got.timings, kTimings);

  // A reused message takes a smaller one without keeping anything of the first.
  Batch one;
  one.add(1, 0, one.add_sequence(std::vector<int32_t>{0}), false);
  pack_activations(8, 0, one, random_rows(kDModel, 4), kDModel, {}, bytes);
  unpack_activations(bytes, kDModel, got);
  EXPECT_EQ(got.batch.n_tokens(), 1);
  EXPECT_TRUE(got.timings.empty());
  EXPECT_EQ(got.batch.block_tables, one.block_tables);
  EXPECT_EQ(got.hidden.size(), static_cast<size_t>(kDModel));
}

TEST(PipelineMessages, StopRoundTrip) {
  std::vector<uint8_t> bytes;
  pack_stop(bytes);
  ActivationsMessage got;
  got.batch = two_sequences();
  unpack_activations(bytes, kDModel, got);
  EXPECT_TRUE(got.stop);
  EXPECT_EQ(got.batch.n_tokens(), 0);
}

TEST(PipelineMessages, ActivationsRefusals) {
  const Batch batch = two_sequences();
  std::vector<uint8_t> bytes;
  pack_activations(1, 0, batch, random_rows(batch.n_tokens() * kDModel, 5), kDModel, kTimings, bytes);
  ActivationsMessage got;
  // Every truncation, each read from a buffer of exactly that size.
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(unpack_activations(cut, kDModel, got), InputError) << n << " bytes";
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(unpack_activations(longer, kDModel, got), InputError);
  EXPECT_THROW(unpack_activations(bytes, kDModel + 1, got), InputError);
  std::vector<uint8_t> magic = bytes;
  magic[0] = 'X';
  EXPECT_THROW(unpack_activations(magic, kDModel, got), InputError);
  std::vector<uint8_t> version = bytes;
  version[4] = 9;
  EXPECT_THROW(unpack_activations(version, kDModel, got), InputError);
  // The last token's sequence id (offset: header, tokens, positions, then seq ids) made 2 of 2.
  std::vector<uint8_t> sequence = bytes;
  const size_t last_seq_id = 64 + 4 * (2 * 6) + 4 * 5;
  const int32_t bad = 2;
  std::memcpy(sequence.data() + last_seq_id, &bad, sizeof(bad));
  EXPECT_THROW(unpack_activations(sequence, kDModel, got), InputError);
  // The last timing's end (the message's last 16 bytes: end, bytes_in) before its start.
  std::vector<uint8_t> backwards = bytes;
  const int64_t early = -4001;
  std::memcpy(backwards.data() + backwards.size() - 16, &early, sizeof(early));
  EXPECT_THROW(unpack_activations(backwards, kDModel, got), InputError);
  unpack_activations(bytes, kDModel, got);  // the original still reads
}

TEST(PipelineMessages, LogitsRoundTripAndRefusals) {
  constexpr int64_t kVocab = 11;
  const std::vector<float> rows = random_rows(3 * kVocab, 6);
  std::vector<uint8_t> bytes;
  pack_logits(5, 1, rows, kVocab, kTimings, bytes);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), logits_message_bytes(3, kVocab, 2));
  std::vector<float> got(rows.size());
  std::vector<StageTiming> timings(2);
  unpack_logits(bytes, 5, 1, kVocab, got, timings);
  EXPECT_EQ(std::memcmp(got.data(), rows.data(), rows.size() * sizeof(float)), 0);
  EXPECT_EQ(timings, kTimings);
  EXPECT_THROW(unpack_logits(bytes, 6, 1, kVocab, got, timings), InputError);  // another step
  EXPECT_THROW(unpack_logits(bytes, 5, 0, kVocab, got, timings), InputError);  // another micro-batch
  std::vector<float> fewer(2 * kVocab);
  EXPECT_THROW(unpack_logits(bytes, 5, 1, kVocab, fewer, timings), InputError);
  std::vector<StageTiming> more_stages(3);
  EXPECT_THROW(unpack_logits(bytes, 5, 1, kVocab, got, more_stages), InputError);
  const std::vector<uint8_t> cut(bytes.begin(), bytes.end() - 1);
  EXPECT_THROW(unpack_logits(cut, 5, 1, kVocab, got, timings), InputError);
  // A timing of rank 0 (stage ranks are 1..S-1): its rank field is the first after the rows.
  std::vector<uint8_t> rank_zero = bytes;
  const int32_t zero = 0;
  std::memcpy(rank_zero.data() + logits_message_bytes(3, kVocab, 0), &zero, sizeof(zero));
  EXPECT_THROW(unpack_logits(rank_zero, 5, 1, kVocab, got, timings), InputError);
}

TEST(PipelineMessages, ClockPingRoundTripAndRefusals) {
  std::vector<uint8_t> bytes;
  for (const ClockPing ping : {ClockPing{.done = false, .clock_ns = -123456789012}, ClockPing{.done = true}}) {
    pack_clock_ping(ping, bytes);
    EXPECT_EQ(unpack_clock_ping(bytes), ping);
  }
  pack_clock_ping({.done = false, .clock_ns = 5}, bytes);
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  EXPECT_THROW(unpack_clock_ping(longer), InputError);
  std::vector<uint8_t> done = bytes;
  done[8] = 2;
  EXPECT_THROW(unpack_clock_ping(done), InputError);
  std::vector<uint8_t> magic = bytes;
  magic[3] = 'X';
  EXPECT_THROW(unpack_clock_ping(magic), InputError);
}

TEST(PipelineMessages, SetupAndReadyRoundTrip) {
  const StageSetup setup{.n_blocks = 123,
                         .block_size = 16,
                         .kv_types = {DType::Q8_0, DType::F16},
                         .max_batch_tokens = 512,
                         .context_length = 2048};
  std::vector<uint8_t> bytes;
  pack_stage_setup(setup, bytes);
  EXPECT_EQ(unpack_stage_setup(bytes), setup);
  std::vector<uint8_t> bad_type = bytes;
  const uint32_t not_kv = static_cast<uint32_t>(DType::Q4_K);
  std::memcpy(bad_type.data() + 36, &not_kv, sizeof(not_kv));  // the K type
  EXPECT_THROW(unpack_stage_setup(bad_type), InputError);
  bytes.pop_back();
  EXPECT_THROW(unpack_stage_setup(bytes), InputError);

  const StageReady ready{.rank = 3, .weight_bytes = int64_t{1} << 33, .kv_bytes = 4096};
  pack_stage_ready(ready, bytes);
  EXPECT_EQ(unpack_stage_ready(bytes), ready);
  bytes[1] = 'X';
  EXPECT_THROW(unpack_stage_ready(bytes), InputError);
}

}  // namespace
}  // namespace tandem
