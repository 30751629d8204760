// compute_perplexity on the real stories260K checkpoint: the result does not depend on how a
// chunk is cut into batches (bit for bit), and it equals a direct computation — one forward
// per chunk with every logit, the NLL of positions ctx/2 .. ctx-2 summed here.
#include "engine/perplexity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

constexpr int32_t kBos = 1;

constexpr const char* kStories = "models/stories260K/model.bin";
std::string stories_path() { return testing::shared_path(kStories); }

std::vector<int32_t> synthetic_tokens(int64_t n) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> id(0, 511);
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& token : tokens) token = id(rng);
  return tokens;
}

class PerplexityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_SHARED(kStories);
    model_ = load_model(stories_path());
  }
  std::shared_ptr<const Model> model_;
  ThreadPool pool_{2};
};

TEST_F(PerplexityTest, SameResultWhateverTheBatchSize) {
  Forward forward(model_, 64, pool_);
  const std::vector<int32_t> tokens = synthetic_tokens(300);
  const PerplexityResult whole = compute_perplexity(forward, tokens, 64, 64, kBos, KvTypes{});
  EXPECT_EQ(whole.chunks, 4);              // 300 / 64, the tail dropped
  EXPECT_EQ(whole.scored_tokens, 4 * 31);  // positions 32..62 of each chunk
  EXPECT_TRUE(std::isfinite(whole.perplexity) && whole.perplexity > 1.0);
  for (int64_t batch_tokens : {16, 7}) {
    std::vector<double> running;
    const PerplexityResult split = compute_perplexity(forward, tokens, 64, batch_tokens, kBos, KvTypes{},
                                                      [&](int64_t, double value) { running.push_back(value); });
    EXPECT_EQ(split.perplexity, whole.perplexity) << "batch_tokens " << batch_tokens;
    EXPECT_EQ(split.uncertainty, whole.uncertainty) << "batch_tokens " << batch_tokens;
    EXPECT_EQ(split.scored_tokens, whole.scored_tokens);
    ASSERT_EQ(running.size(), 4u);
    EXPECT_EQ(running.back(), whole.perplexity);
  }
}

TEST_F(PerplexityTest, MatchesDirectComputation) {
  const int64_t ctx = 64, vocab = model_->config.vocab_size;
  Forward forward(model_, ctx, pool_);
  const std::vector<int32_t> tokens = synthetic_tokens(300);
  const PerplexityResult result = compute_perplexity(forward, tokens, ctx, 16, kBos, KvTypes{});

  double sum_nll = 0.0, sum_nll_squared = 0.0;
  int64_t count = 0;
  for (int64_t chunk = 0; chunk < 4; ++chunk) {
    std::vector<int32_t> chunk_tokens(tokens.begin() + chunk * ctx, tokens.begin() + (chunk + 1) * ctx);
    chunk_tokens[0] = kBos;
    KvCache cache(model_->config.kv_shape(), ctx, 1);
    Batch batch;
    const int32_t seq = batch.add_sequence(cache.whole_pool_blocks());
    for (int64_t p = 0; p < ctx; ++p) batch.add(chunk_tokens[p], static_cast<int32_t>(p), seq, true);
    const std::span<const float> logits = forward.run(batch, cache);
    ASSERT_EQ(static_cast<int64_t>(logits.size()), ctx * vocab);
    for (int64_t p = ctx / 2; p <= ctx - 2; ++p) {
      const float* row = logits.data() + p * vocab;
      // log-sum-exp without the max shift: these logits are small, and a different route
      // from the engine's is the point of a cross-check.
      double sum = 0.0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]));
      const double nll = std::log(sum) - row[chunk_tokens[p + 1]];
      sum_nll += nll;
      sum_nll_squared += nll * nll;
      ++count;
    }
  }
  ASSERT_EQ(count, result.scored_tokens);
  const double mean = sum_nll / static_cast<double>(count);
  const double perplexity = std::exp(mean);
  EXPECT_NEAR(result.perplexity, perplexity, 1e-9 * perplexity);
  const double variance = sum_nll_squared / static_cast<double>(count) - mean * mean;
  const double uncertainty = perplexity * std::sqrt(variance / static_cast<double>(count - 1));
  EXPECT_NEAR(result.uncertainty, uncertainty, 1e-6 * uncertainty);
}

TEST_F(PerplexityTest, RejectsTooFewTokensAndBadContext) {
  Forward forward(model_, 64, pool_);
  const std::vector<int32_t> tokens = synthetic_tokens(50);
  EXPECT_THROW(compute_perplexity(forward, tokens, 64, 64, kBos, KvTypes{}), InputError);  // not one chunk
  EXPECT_THROW(compute_perplexity(forward, tokens, 2, 64, kBos, KvTypes{}), InputError);   // ctx below 4
  EXPECT_THROW(compute_perplexity(forward, tokens, model_->config.context_length + 1, 64, kBos, KvTypes{}), InputError);
}

}  // namespace
}  // namespace tandem
