// compare_kv_types (engine/kv_divergence.h): KL divergence of next-token distributions and
// top-1 agreement between two KV cache types, on a random model with heads of 32, against
// compute_perplexity for each type and a direct KL of two hand-made rows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/thread_pool.h"
#include "engine/kv_divergence.h"
#include "engine/perplexity.h"
#include "model/model.h"
#include "support/random_model.h"

namespace tandem {
namespace {

TEST(KlDivergence, OfTwoRowsIsTheTextbookSum) {
  const std::vector<float> p = {1.0f, 2.0f, 0.5f}, q = {0.0f, 2.5f, 1.0f};
  auto softmax = [](const std::vector<float>& x) {
    double sum = 0.0;
    for (float v : x) sum += std::exp(static_cast<double>(v));
    std::vector<double> out;
    for (float v : x) out.push_back(std::exp(static_cast<double>(v)) / sum);
    return out;
  };
  const std::vector<double> pp = softmax(p), qq = softmax(q);
  double expected = 0.0;
  for (size_t i = 0; i < 3; ++i) expected += pp[i] * std::log(pp[i] / qq[i]);
  EXPECT_NEAR(kl_divergence(p.data(), q.data(), 3), expected, 1e-12);
  EXPECT_EQ(kl_divergence(p.data(), p.data(), 3), 0.0);
}

class KvDivergenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test_support::RandomModelSpec spec;
    spec.d_model = 64, spec.n_heads = 2, spec.n_kv_heads = 1, spec.d_ff = 96, spec.vocab_size = 67;
    spec.context_length = 64, spec.seed = 17;
    const std::string path = dir_.file("heads-of-32.gguf");
    test_support::write_random_model(spec, path);
    model_ = load_model(path);
    std::mt19937 rng(4);
    std::uniform_int_distribution<int32_t> id(0, 66);
    for (int i = 0; i < 200; ++i) tokens_.push_back(id(rng));
  }
  test_support::TempDir dir_;
  std::shared_ptr<const Model> model_;
  std::vector<int32_t> tokens_;
  ThreadPool pool_{2};
};

TEST_F(KvDivergenceTest, SameTypesGiveZeroAndEachRunIsItsOwnPerplexity) {
  Forward forward(model_, 32, pool_);
  const KvTypes f32{DType::F32, DType::F32}, q4{DType::Q4_0, DType::Q4_0};
  const KvDivergenceResult same = compare_kv_types(forward, tokens_, 64, 32, 1, f32, f32);
  EXPECT_EQ(same.mean_kl, 0.0);
  EXPECT_EQ(same.top1_agreement, 1.0);
  EXPECT_EQ(same.base.perplexity, same.test.perplexity);
  EXPECT_EQ(same.scored_tokens, 3 * 31);  // 3 chunks of 64, positions 32..62 scored

  const KvDivergenceResult result = compare_kv_types(forward, tokens_, 64, 32, 1, f32, q4);
  EXPECT_EQ(result.base.perplexity, compute_perplexity(forward, tokens_, 64, 32, 1, f32).perplexity);
  EXPECT_EQ(result.test.perplexity, compute_perplexity(forward, tokens_, 64, 32, 1, q4).perplexity);
  EXPECT_GT(result.mean_kl, 0.0);
  EXPECT_GE(result.max_kl, result.mean_kl);
  EXPECT_LE(result.top1_agreement, 1.0);
}

// Coarser types move the distributions further: KL(f32 || f16) < KL(f32 || q8_0) < KL(f32 || q4_0).
TEST_F(KvDivergenceTest, CoarserTypesDivergeMore) {
  Forward forward(model_, 64, pool_);
  const KvTypes f32{DType::F32, DType::F32};
  auto kl = [&](DType type) { return compare_kv_types(forward, tokens_, 64, 64, 1, f32, {type, type}).mean_kl; };
  const double f16 = kl(DType::F16), q8 = kl(DType::Q8_0), q4 = kl(DType::Q4_0);
  std::printf("mean KL against f32: f16 %.3e, q8_0 %.3e, q4_0 %.3e\n", f16, q8, q4);
  EXPECT_GT(f16, 0.0);
  EXPECT_LT(f16, q8);
  EXPECT_LT(q8, q4);
}

}  // namespace
}  // namespace tandem
