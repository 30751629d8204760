// The AVX-512 attention kernel (kernel_table(Isa::Avx512).attention) against a double
// computation over head sizes, context lengths around the tile edges, GQA group sizes and
// peaked softmaxes; its batch invariance (a query alone equals the same query inside any
// group, bit for bit); and the accuracy of its vector exp. Skipped on CPUs without AVX-512.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

bool has_avx512() { return static_cast<int>(detect_isa()) >= static_cast<int>(Isa::Avx512); }

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float low, float high) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = uniform(rng);
  return values;
}

// A KV cache of n_slots rows holding n_kv_heads heads, and a shuffled position -> slot table.
struct Cache {
  int64_t head_dim, kv_width;
  std::vector<float> keys, values;  // [n_slots, kv_width]
  std::vector<int32_t> slots;       // [n_slots]
};

Cache make_cache(std::mt19937& rng, int64_t n_slots, int64_t n_kv_heads, int64_t head_dim) {
  Cache cache{head_dim, n_kv_heads * head_dim, random_floats(rng, n_slots * n_kv_heads * head_dim, -1.0f, 1.0f),
              random_floats(rng, n_slots * n_kv_heads * head_dim, -1.0f, 1.0f), std::vector<int32_t>(n_slots)};
  std::iota(cache.slots.begin(), cache.slots.end(), 0);
  std::shuffle(cache.slots.begin(), cache.slots.end(), rng);
  return cache;
}

// One query head's attention output in double.
std::vector<double> attention_in_double(const float* q, const Cache& cache, int64_t kv_offset, int64_t n_ctx) {
  const int64_t head_dim = cache.head_dim;
  std::vector<double> weights(static_cast<size_t>(n_ctx));
  double max_score = -INFINITY, denominator = 0.0;
  for (int64_t p = 0; p < n_ctx; ++p) {
    const float* k = cache.keys.data() + cache.slots[p] * cache.kv_width + kv_offset;
    double dot = 0.0;
    for (int64_t i = 0; i < head_dim; ++i) dot += static_cast<double>(q[i]) * k[i];
    weights[p] = dot / std::sqrt(static_cast<double>(head_dim));
    max_score = std::max(max_score, weights[p]);
  }
  for (double& w : weights) denominator += (w = std::exp(w - max_score));
  std::vector<double> out(static_cast<size_t>(head_dim), 0.0);
  for (int64_t p = 0; p < n_ctx; ++p)
    for (int64_t i = 0; i < head_dim; ++i)
      out[i] += weights[p] / denominator * cache.values[cache.slots[p] * cache.kv_width + kv_offset + i];
  return out;
}

std::vector<float> run_attention(const float* queries, int64_t n_queries, const Cache& cache, int64_t kv_offset,
                                 int64_t n_ctx) {
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_queries * cache.head_dim));
  kernel_table(Isa::Avx512)
      .attention(queries, n_queries, cache.keys.data(), cache.values.data(), cache.kv_width, kv_offset,
                 cache.slots.data(), n_ctx, cache.head_dim, scratch.data(), out.data());
  return out;
}

const std::vector<int64_t> kContextLengths = {1, 2, 15, 16, 17, 40, 63, 64, 65, 100, 127, 128, 129, 191, 200};

TEST(AttentionAvx512Test, GroupMatchesDoubleThroughShuffledSlots) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this machine";
  std::mt19937 rng(11);
  const int64_t n_slots = 200, n_kv_heads = 2;
  for (int64_t head_dim : {16, 64, 128})
    for (int64_t group : {1, 4, 5, 8}) {  // 5: query pairs and a query left over
      const Cache cache = make_cache(rng, n_slots, n_kv_heads, head_dim);
      // Scores have a standard deviation of q_bound / 3 whatever head_dim: 1 gives a flat
      // softmax; 30 gives scores up to about ±30, where one or two positions take nearly all the
      // weight and the running max moves from tile to tile.
      for (float q_bound : {1.0f, 8.0f, 30.0f}) {
        const std::vector<float> queries = random_floats(rng, group * head_dim, -q_bound, q_bound);
        for (int64_t n_ctx : kContextLengths) {
          const int64_t kv_offset = (n_ctx % n_kv_heads) * head_dim;
          const std::vector<float> out = run_attention(queries.data(), group, cache, kv_offset, n_ctx);
          for (int64_t g = 0; g < group; ++g) {
            const std::vector<double> expected =
                attention_in_double(queries.data() + g * head_dim, cache, kv_offset, n_ctx);
            for (int64_t i = 0; i < head_dim; ++i)
              ASSERT_NEAR(out[g * head_dim + i], expected[i], 1e-5)  // |v| <= 1
                  << "head_dim " << head_dim << " group " << group << " q_bound " << q_bound << " n_ctx " << n_ctx
                  << " query " << g << " dim " << i;
          }
        }
      }
    }
}

TEST(AttentionAvx512Test, QueryAloneEqualsQueryInAnyGroup) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this machine";
  std::mt19937 rng(12);
  const int64_t n_slots = 200;
  for (int64_t head_dim : {16, 64, 128}) {
    const Cache cache = make_cache(rng, n_slots, 1, head_dim);
    for (int64_t n_ctx : kContextLengths) {
      const std::vector<float> queries = random_floats(rng, 8 * head_dim, -10.0f, 10.0f);  // [8, head_dim]
      std::vector<float> alone(static_cast<size_t>(8 * head_dim));
      for (int64_t g = 0; g < 8; ++g) {
        const std::vector<float> out = run_attention(queries.data() + g * head_dim, 1, cache, 0, n_ctx);
        std::copy(out.begin(), out.end(), alone.begin() + g * head_dim);
      }
      // Every window of 2..8 consecutive queries: each member must equal its solo result.
      for (int64_t size = 2; size <= 8; ++size)
        for (int64_t first = 0; first + size <= 8; ++first) {
          const std::vector<float> out = run_attention(queries.data() + first * head_dim, size, cache, 0, n_ctx);
          ASSERT_EQ(0, std::memcmp(out.data(), alone.data() + first * head_dim, out.size() * sizeof(float)))
              << "head_dim " << head_dim << " n_ctx " << n_ctx << " group of " << size << " from " << first;
        }
    }
  }
}

TEST(AttentionAvx512Test, VectorExpMatchesStdExp) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this machine";
  std::vector<float> x;
  for (float v = -100.0f; v <= 0.0f; v += 1.0f / 4096.0f) x.push_back(v);
  x.push_back(0.0f);
  x.push_back(-0.0f);
  x.push_back(-std::numeric_limits<float>::min());
  std::vector<float> out(x.size());
  avx512::attention_exp(x.data(), static_cast<int64_t>(x.size()), out.data());
  // Results are kept normal: below exp(-87), just above the smallest normal float, the
  // kernel gives 0 (a softmax weight that small is lost next to the largest weight, 1).
  double max_relative = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] >= -87.0f) {
      const double exact = std::exp(static_cast<double>(x[i]));
      max_relative = std::max(max_relative, std::abs(out[i] - exact) / exact);
    } else {
      ASSERT_EQ(out[i], 0.0f) << "x " << x[i];
    }
  }
  EXPECT_LT(max_relative, 2e-7);  // under 2 ulp
  EXPECT_EQ(out[out.size() - 3], 1.0f);
  EXPECT_EQ(out[out.size() - 2], 1.0f);

  // -inf (masked positions, the first tile's correction) and very negative arguments give 0;
  // the odd count also exercises the masked tail.
  const std::vector<float> tiny = {-INFINITY, -std::numeric_limits<float>::max(), -1e6f, -200.0f, -87.5f};
  std::vector<float> zeros(tiny.size(), 1.0f);
  avx512::attention_exp(tiny.data(), static_cast<int64_t>(tiny.size()), zeros.data());
  for (size_t i = 0; i < tiny.size(); ++i) EXPECT_EQ(zeros[i], 0.0f) << "x " << tiny[i];
}

}  // namespace
}  // namespace tandem
