// Attention logit soft-capping (Gemma 2: score -> cap·tanh(score / cap) before the softmax) at
// every level this CPU has, against a double computation of the same formula, over head sizes
// the vector kernels take and ones they hand to the portable kernel, GQA groups and context
// lengths around the tile edges; a run of tokens equals the tokens one at a time bit for bit
// with a cap, and a cap changes the result where the scores are large.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "support/attention_reference.h"
#include "support/cpu_levels.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

// Uniform in [-spread, spread).
std::vector<float> random_floats(std::mt19937& rng, int64_t n, float spread) {
  return tandem::random_floats(rng, n, -spread, spread);
}

struct Cache {
  int64_t head_dim, kv_width;
  std::vector<float> keys, values;  // [n_slots, kv_width]
  std::vector<int32_t> slots;       // [n_slots], shuffled
};

Cache make_cache(std::mt19937& rng, int64_t n_slots, int64_t n_kv_heads, int64_t head_dim) {
  Cache cache{head_dim, n_kv_heads * head_dim, random_floats(rng, n_slots * n_kv_heads * head_dim, 1.0f),
              random_floats(rng, n_slots * n_kv_heads * head_dim, 1.0f), std::vector<int32_t>(n_slots)};
  std::iota(cache.slots.begin(), cache.slots.end(), 0);
  std::shuffle(cache.slots.begin(), cache.slots.end(), rng);
  return cache;
}

// One query head's output in double, soft-capped when cap > 0.
std::vector<double> capped_attention_in_double(const float* q, const Cache& cache, int64_t kv_offset, int64_t n_ctx,
                                               double cap) {
  return reference_attention(q, {cache.keys.data(), cache.values.data(), cache.kv_width, cache.slots.data()}, kv_offset,
                             n_ctx, cache.head_dim, cap);
}

std::vector<float> run_group(Isa isa, const float* queries, int64_t group, const Cache& cache, int64_t kv_offset,
                             int64_t n_ctx, float cap) {
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
  std::vector<float> out(static_cast<size_t>(group * cache.head_dim));
  kernel_table(isa).attention(queries, group, f32_kv_rows(cache.keys.data(), cache.kv_width),
                              f32_kv_rows(cache.values.data(), cache.kv_width), kv_offset, cache.slots.data(), n_ctx,
                              cache.head_dim, scratch.data(), out.data(), cap, nullptr, nullptr);
  return out;
}

// Head sizes: multiples of 16 (every vector kernel), of 8 only (AVX2's; AVX-512 falls back),
// and an odd one (portable everywhere).
const std::vector<int64_t> kHeadDims = {8, 24, 64, 72, 256, 13};
const std::vector<int64_t> kContextLengths = {1, 7, 16, 17, 63, 64, 65, 130};

TEST(AttentionSoftcapTest, EveryLevelMatchesDouble) {
  std::mt19937 rng(20261203);
  for (Isa isa : supported_levels()) {
    for (int64_t head_dim : kHeadDims) {
      for (int64_t group : {1, 3}) {
        const int64_t n_kv_heads = 2, kv_offset = head_dim;  // the second KV head
        const Cache cache = make_cache(rng, 140, n_kv_heads, head_dim);
        // Large queries: scores of several tens, where the cap bends them.
        const std::vector<float> queries = random_floats(rng, group * head_dim, 12.0f);
        for (int64_t n_ctx : kContextLengths) {
          for (float cap : {5.0f, 50.0f}) {
            const std::vector<float> out = run_group(isa, queries.data(), group, cache, kv_offset, n_ctx, cap);
            for (int64_t g = 0; g < group; ++g) {
              const std::vector<double> expected =
                  capped_attention_in_double(queries.data() + g * head_dim, cache, kv_offset, n_ctx, cap);
              for (int64_t i = 0; i < head_dim; ++i)
                ASSERT_NEAR(expected[static_cast<size_t>(i)], out[static_cast<size_t>(g * head_dim + i)], 2e-5)
                    << isa_name(isa) << " head_dim " << head_dim << " group " << group << " n_ctx " << n_ctx << " cap "
                    << cap << " query " << g << " element " << i;
            }
          }
        }
      }
    }
  }
}

TEST(AttentionSoftcapTest, CapChangesLargeScores) {
  std::mt19937 rng(7);
  for (Isa isa : supported_levels()) {
    const int64_t head_dim = 64, n_ctx = 70;
    const Cache cache = make_cache(rng, 80, 1, head_dim);
    const std::vector<float> queries = random_floats(rng, head_dim, 12.0f);
    const std::vector<float> plain = run_group(isa, queries.data(), 1, cache, 0, n_ctx, 0.0f);
    const std::vector<float> capped = run_group(isa, queries.data(), 1, cache, 0, n_ctx, 5.0f);
    double difference = 0.0;
    for (size_t i = 0; i < plain.size(); ++i)
      difference = std::max(difference, std::fabs(double{plain[i]} - capped[i]));
    EXPECT_GT(difference, 1e-3) << isa_name(isa);
    // The uncapped run is the double reference without a cap.
    const std::vector<double> expected = capped_attention_in_double(queries.data(), cache, 0, n_ctx, 0.0);
    for (int64_t i = 0; i < head_dim; ++i)
      ASSERT_NEAR(expected[static_cast<size_t>(i)], plain[static_cast<size_t>(i)], 2e-5) << isa_name(isa);
  }
}

// With a cap, a prefill block through attention_tokens gives each token what it gets alone.
TEST(AttentionSoftcapTest, TokensEqualTokenByTokenWithCap) {
  std::mt19937 rng(11);
  for (Isa isa : supported_levels()) {
    for (int64_t head_dim : {16, 24, 64, 13}) {
      const int64_t group = 2, n_tokens = 21, stride = group * head_dim;
      const Cache cache = make_cache(rng, 160, 1, head_dim);
      const std::vector<float> queries = random_floats(rng, n_tokens * stride, 12.0f);
      std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
      std::iota(positions.begin(), positions.end(), 50);
      std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
      std::vector<float> together(static_cast<size_t>(n_tokens * stride));
      kernel_table(isa).attention_tokens(queries.data(), stride, n_tokens, group, positions.data(),
                                         f32_kv_rows(cache.keys.data(), cache.kv_width),
                                         f32_kv_rows(cache.values.data(), cache.kv_width), 0, cache.slots.data(),
                                         head_dim, scratch.data(), together.data(), stride, 7.5f, nullptr, nullptr);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> alone =
            run_group(isa, queries.data() + t * stride, group, cache, 0, positions[t] + 1, 7.5f);
        ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + t * stride, alone.size() * sizeof(float)))
            << isa_name(isa) << " head_dim " << head_dim << " token " << t;
      }
    }
  }
}

}  // namespace
}  // namespace tandem
