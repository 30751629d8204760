// The forward pass over a KV cache of every storage type (F32, F16, BF16, Q8_0, Q4_0, and K/V
// of different types), on a random model with heads of 32 (whole Q8_0/Q4_0 blocks) and GQA:
// a sequence's logits do not depend on how its prompt is chunked (whole, in pieces, a token at
// a time) nor on its batch neighbours, bit for bit; and each type stays near the F32 cache.
// stories260K (heads of 8) repeats the batch-invariance check for the 16-bit types.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"
#include "support/random_model.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

using test_support::RandomModelSpec;
using test_support::TempDir;

const KvTypes kEveryKvType[] = {{DType::F32, DType::F32},   {DType::F16, DType::F16},   {DType::BF16, DType::BF16},
                                {DType::Q8_0, DType::Q8_0}, {DType::Q4_0, DType::Q4_0}, {DType::Q8_0, DType::F16}};

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& token : tokens) token = id(rng);
  return tokens;
}

// Feeds `tokens` as one sequence in batches of `step` tokens (every row asking for logits)
// over a cache of `types` whose blocks of 4 are scattered over the pool.
std::vector<float> run_in_steps(Forward& forward, const std::vector<int32_t>& tokens, int64_t step,
                                const KvTypes& types) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  KvCache cache(forward.model().config.kv_shape(), 20, 4, types);
  std::vector<int32_t> blocks(20);
  for (int32_t b = 0; b < 20; ++b) blocks[static_cast<size_t>(b)] = (b * 7) % 20;
  std::vector<float> logits;
  Batch batch;
  for (int64_t begin = 0; begin < n; begin += step) {
    batch.clear();
    const int32_t seq = batch.add_sequence(blocks);
    for (int64_t p = begin; p < std::min(n, begin + step); ++p)
      batch.add(tokens[p], static_cast<int32_t>(p), seq, true);
    std::span<const float> out = forward.run(batch, cache);
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

int64_t differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  int64_t differing = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0 ? 1 : 0;
  return differing;
}

class KvTypesForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.d_model = 64, spec_.n_heads = 2, spec_.n_kv_heads = 1, spec_.d_ff = 96, spec_.n_layers = 2;
    spec_.context_length = 80, spec_.seed = 31;
    const std::string path = dir_.file("heads-of-32.gguf");
    test_support::write_random_model(spec_, path);
    model_ = load_model(path);
    ASSERT_EQ(model_->config.head_dim, 32);
  }
  RandomModelSpec spec_;
  TempDir dir_;
  std::shared_ptr<const Model> model_;
};

TEST_F(KvTypesForwardTest, ChunkingDoesNotChangeAnyBitForEveryType) {
  ThreadPool pool(2);
  Forward forward(model_, 80, pool);
  const std::vector<int32_t> tokens = random_tokens(70, spec_.vocab_size, 3);
  for (const KvTypes& types : kEveryKvType) {
    const std::vector<float> whole = run_in_steps(forward, tokens, 70, types);
    EXPECT_EQ(differing_bits(whole, run_in_steps(forward, tokens, 9, types)), 0) << kv_types_description(types);
    EXPECT_EQ(differing_bits(whole, run_in_steps(forward, tokens, 1, types)), 0) << kv_types_description(types);
  }
}

// Sequence A alone (1 thread) against A sharing every batch with B (2 threads), B part prefill,
// part decode alongside A, the two sequences' blocks interleaved in one pool.
TEST_F(KvTypesForwardTest, NeighboursDoNotChangeAnyBitForEveryType) {
  const int64_t vocab = spec_.vocab_size;
  const std::vector<int32_t> a = random_tokens(30, vocab, 7), b = random_tokens(24, vocab, 8);
  ThreadPool one(1), two(2);
  Forward alone_forward(model_, 64, one), mixed_forward(model_, 64, two);
  for (const KvTypes& types : kEveryKvType) {
    const std::vector<float> alone = run_in_steps(alone_forward, a, 30, types);
    KvCache cache(model_->config.kv_shape(), 16, 4, types);
    const std::vector<int32_t> blocks_b = {15, 3, 9, 0, 12, 6}, blocks_a = {1, 14, 2, 8, 11, 5, 13, 10};
    std::vector<float> mixed(alone.size());
    Batch batch;
    batch.add_sequence(blocks_b);
    batch.add_sequence(blocks_a);
    for (int32_t p = 0; p < 20; ++p) batch.add(b[p], p, 0, true);
    for (int32_t p = 0; p < 10; ++p) batch.add(a[p], p, 1, true);
    std::span<const float> out = mixed_forward.run(batch, cache);
    std::copy_n(out.data() + 20 * vocab, 10 * vocab, mixed.data());
    int32_t next_b = 20;
    for (int32_t p = 10; p < 30; p += 5) {
      batch.clear();
      batch.add_sequence(blocks_b);
      batch.add_sequence(blocks_a);
      for (int32_t i = p; i < p + 5; ++i) batch.add(a[i], i, 1, true);
      if (next_b < 24) {
        batch.add(b[next_b], next_b, 0, true);
        ++next_b;
      }
      out = mixed_forward.run(batch, cache);
      std::copy_n(out.data(), 5 * vocab, mixed.data() + p * vocab);
    }
    EXPECT_EQ(differing_bits(alone, mixed), 0) << kv_types_description(types);
  }
}

// Each type's logits against the F32 cache's, as the largest difference over the largest
// |logit|: the types' rounding (F16 11 bits, BF16 8, Q8_0 ~7 per block, Q4_0 ~3) and no more.
TEST_F(KvTypesForwardTest, EveryTypeStaysNearF32) {
  ThreadPool pool(2);
  Forward forward(model_, 80, pool);
  const std::vector<int32_t> tokens = random_tokens(70, spec_.vocab_size, 5);
  const std::vector<float> f32 = run_in_steps(forward, tokens, 70, {DType::F32, DType::F32});
  float largest = 0.0f;
  for (float x : f32) largest = std::max(largest, std::fabs(x));
  auto relative_error = [&](const KvTypes& types) {
    const std::vector<float> got = run_in_steps(forward, tokens, 70, types);
    float worst = 0.0f;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - f32[i]));
    return worst / largest;
  };
  const float f16 = relative_error({DType::F16, DType::F16}), bf16 = relative_error({DType::BF16, DType::BF16});
  const float q8 = relative_error({DType::Q8_0, DType::Q8_0}), q4 = relative_error({DType::Q4_0, DType::Q4_0});
  std::printf("largest logit difference / largest logit: f16 %.2e, bf16 %.2e, q8_0 %.2e, q4_0 %.2e\n", f16, bf16, q8,
              q4);
  EXPECT_GT(f16, 0.0f);  // the type is really used
  EXPECT_LT(f16, 2e-3f);
  EXPECT_LT(bf16, 1.5e-2f);
  EXPECT_LT(q8, 2e-2f);
  EXPECT_LT(q4, 0.2f);
  EXPECT_LT(f16, bf16);
  EXPECT_LT(q8, q4);
}

// ---- stories260K (GQA 8 heads / 4 KV heads of 8): the 16-bit types' batch invariance. ----

TEST(Stories260KTest, SixteenBitKvCachesArePrefillDecodeInvariant) {
  TANDEM_REQUIRE_SHARED("models/stories260K/model.bin");
  const auto model = load_model(testing::shared_path("models/stories260K/model.bin"));
  ThreadPool pool(2);
  Forward forward(model, 40, pool);
  std::vector<int32_t> tokens = random_tokens(40, 512, 99);
  tokens[0] = 1;  // BOS
  for (const KvTypes& types : {KvTypes{DType::F16, DType::F16}, KvTypes{DType::BF16, DType::BF16}}) {
    const std::vector<float> prefill = run_in_steps(forward, tokens, 40, types);
    EXPECT_EQ(differing_bits(prefill, run_in_steps(forward, tokens, 1, types)), 0) << kv_types_description(types);
    EXPECT_EQ(differing_bits(prefill, run_in_steps(forward, tokens, 7, types)), 0) << kv_types_description(types);
  }
}

}  // namespace
}  // namespace tandem
