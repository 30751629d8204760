// The AVX-512 attention kernel (kernel_table(Isa::Avx512).attention) against a double
// computation over head sizes, context lengths around the tile edges, GQA group sizes and
// peaked softmaxes; its batch invariance (a query alone equals the same query inside any
// group, bit for bit, and a token equals the same token in any run of tokens through
// attention_tokens); and the accuracy of its vector exp. Skipped on CPUs without AVX-512.
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
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "support/attention_reference.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

bool has_avx512() { return static_cast<int>(detect_isa()) >= static_cast<int>(Isa::Avx512); }

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
  return reference_attention(q, {cache.keys.data(), cache.values.data(), cache.kv_width, cache.slots.data()}, kv_offset,
                             n_ctx, cache.head_dim);
}

std::vector<float> run_attention(const float* queries, int64_t n_queries, const Cache& cache, int64_t kv_offset,
                                 int64_t n_ctx) {
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_queries * cache.head_dim));
  kernel_table(Isa::Avx512)
      .attention(queries, n_queries, f32_kv_rows(cache.keys.data(), cache.kv_width),
                 f32_kv_rows(cache.values.data(), cache.kv_width), kv_offset, cache.slots.data(), n_ctx, cache.head_dim,
                 scratch.data(), out.data(), 0.0f, nullptr, nullptr);
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

// Queries for n_tokens tokens of group query heads each, token t's at t * query_stride, and
// room for their outputs at t * out_stride (strides past the group, as in a batch's rows).
struct TokenRun {
  int64_t group, head_dim, query_stride, out_stride;
  std::vector<int32_t> positions;  // [n_tokens] ascending
  std::vector<float> queries;      // [n_tokens, query_stride]
};

TokenRun make_run(std::mt19937& rng, std::vector<int32_t> positions, int64_t group, int64_t head_dim) {
  const auto n_tokens = static_cast<int64_t>(positions.size());
  const int64_t query_stride = 3 * group * head_dim, out_stride = group * head_dim + 16;
  return TokenRun{group,
                  head_dim,
                  query_stride,
                  out_stride,
                  std::move(positions),
                  random_floats(rng, n_tokens * query_stride, -10.0f, 10.0f)};
}

std::vector<int32_t> consecutive_positions(int32_t first, int32_t n_tokens) {
  std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
  std::iota(positions.begin(), positions.end(), first);
  return positions;
}

using TokensKernel = AttentionTokensFn;

// The run's outputs [n_tokens, out_stride] from one multi-token call; the gaps between rows
// stay at their initial 7.0f.
std::vector<float> run_tokens(TokensKernel kernel, const TokenRun& run, const Cache& cache, int64_t kv_offset) {
  const auto n_tokens = static_cast<int64_t>(run.positions.size());
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(run.group)));
  std::vector<float> out(static_cast<size_t>(n_tokens * run.out_stride), 7.0f);
  kernel(run.queries.data(), run.query_stride, n_tokens, run.group, run.positions.data(),
         f32_kv_rows(cache.keys.data(), cache.kv_width), f32_kv_rows(cache.values.data(), cache.kv_width), kv_offset,
         cache.slots.data(), run.head_dim, scratch.data(), out.data(), run.out_stride, 0.0f, nullptr, nullptr);
  return out;
}

// The same outputs, token by token through a level's attention_group.
std::vector<float> run_token_by_token(Isa isa, const TokenRun& run, const Cache& cache, int64_t kv_offset) {
  const auto n_tokens = static_cast<int64_t>(run.positions.size());
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(run.group)));
  std::vector<float> out(static_cast<size_t>(n_tokens * run.out_stride), 7.0f);
  for (int64_t t = 0; t < n_tokens; ++t)
    kernel_table(isa).attention(
        run.queries.data() + t * run.query_stride, run.group, f32_kv_rows(cache.keys.data(), cache.kv_width),
        f32_kv_rows(cache.values.data(), cache.kv_width), kv_offset, cache.slots.data(), run.positions[t] + 1,
        run.head_dim, scratch.data(), out.data() + t * run.out_stride, 0.0f, nullptr, nullptr);
  return out;
}

// The first token (of a row-major [n_tokens, out_stride] pair) whose row differs in any bit.
int64_t first_differing_token(const std::vector<float>& a, const std::vector<float>& b, int64_t out_stride) {
  for (size_t t = 0; t * out_stride < a.size(); ++t)
    if (std::memcmp(a.data() + t * out_stride, b.data() + t * out_stride, out_stride * sizeof(float)) != 0)
      return static_cast<int64_t>(t);
  return -1;
}

// Runs of 1..17 consecutive tokens starting at and around tile (64) and block (16) edges, so
// that tokens' contexts end inside a shared tile, in the same or different blocks; group 1
// (MHA: tokens pair up to share loads), 2, and 8 and 5 (query packs crossing tokens), head sizes
// with 4, 2 and 1 accumulator chains.
TEST(AttentionAvx512Test, TokensEqualTokenByToken) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this machine";
  std::mt19937 rng(13);
  const int64_t n_slots = 160, n_kv_heads = 2;
  for (int64_t head_dim : {16, 64, 128}) {
    const Cache cache = make_cache(rng, n_slots, n_kv_heads, head_dim);
    for (int64_t group : {1, 2, 5, 8})
      for (int32_t first : {0, 13, 50, 60, 63, 120, 140})
        for (int32_t n_tokens = 1; n_tokens <= 17; ++n_tokens) {
          const TokenRun run = make_run(rng, consecutive_positions(first, n_tokens), group, head_dim);
          const int64_t kv_offset = (first % n_kv_heads) * head_dim;
          const std::vector<float> together = run_tokens(avx512::attention_tokens, run, cache, kv_offset);
          const std::vector<float> alone = run_token_by_token(Isa::Avx512, run, cache, kv_offset);
          ASSERT_EQ(first_differing_token(together, alone, run.out_stride), -1)
              << "head_dim " << head_dim << " group " << group << " positions " << first << ".."
              << first + n_tokens - 1;
        }
  }
}

// Positions a prefill never has but the kernel allows: gaps, repeats, and a run wider than one
// pass over the tiles (more than 128 queries).
TEST(AttentionAvx512Test, TokensWithGapsAndRepeatsEqualTokenByToken) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this machine";
  std::mt19937 rng(14);
  const int64_t n_slots = 300;
  const std::vector<std::vector<int32_t>> runs = {
      {0, 0, 0}, {5, 20, 21, 21, 70, 130, 131}, {63, 64, 65, 127, 128, 129, 199}, consecutive_positions(100, 40)};
  for (int64_t head_dim : {32, 64, 128}) {
    const Cache cache = make_cache(rng, n_slots, 1, head_dim);
    for (int64_t group : {1, 4, 8})
      for (const std::vector<int32_t>& positions : runs) {
        const TokenRun run = make_run(rng, positions, group, head_dim);
        EXPECT_EQ(first_differing_token(run_tokens(avx512::attention_tokens, run, cache, 0),
                                        run_token_by_token(Isa::Avx512, run, cache, 0), run.out_stride),
                  -1)
            << "head_dim " << head_dim << " group " << group << " from position " << positions.front();
      }
  }
}

// A position only later tokens see holds non-finite K/V (a poisoned row): the tokens before it
// must not be touched by it, though they share its tile, block and loads. Alone they never read
// it: their weighted sums round up over their own last row, not the next ones.
TEST(AttentionAvx512Test, TokensIgnoreRowsPastTheirContext) {
  if (!has_avx512()) GTEST_SKIP() << "no AVX-512 on this machine";
  std::mt19937 rng(15);
  for (int64_t head_dim : {16, 64, 128}) {
    Cache cache = make_cache(rng, 100, 1, head_dim);
    const int32_t poisoned = 71;
    std::fill_n(cache.values.begin() + cache.slots[poisoned] * cache.kv_width, head_dim, INFINITY);
    std::fill_n(cache.keys.begin() + cache.slots[poisoned] * cache.kv_width, head_dim, NAN);
    for (int64_t group : {1, 3}) {
      const TokenRun run = make_run(rng, consecutive_positions(60, 16), group, head_dim);  // 60..75
      const std::vector<float> together = run_tokens(avx512::attention_tokens, run, cache, 0);
      const std::vector<float> alone = run_token_by_token(Isa::Avx512, run, cache, 0);
      const size_t clean = static_cast<size_t>((poisoned - 60) * run.out_stride);  // tokens 60..70
      EXPECT_EQ(0, std::memcmp(together.data(), alone.data(), clean * sizeof(float)))
          << "head_dim " << head_dim << " group " << group;
      for (size_t i = 0; i < clean; ++i) ASSERT_TRUE(std::isfinite(together[i])) << "element " << i;
    }
  }
}

// The public attention_tokens (the active level, segments above kAttentionSegment) as a TokensKernel.
void public_attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                             const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                             const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                             float softcap, const float* sinks, AttentionPartial*) {
  attention_tokens(queries, query_stride, n_tokens, group, positions, keys, values, kv_offset, slots, head_dim, scratch,
                   out, out_stride, softcap, sinks);
}

// attention_tokens through the active level (whatever this CPU has, and the portable
// kernels' token-by-token fallback where it lacks AVX-512) equals that level's attention_group.
TEST(AttentionTokensTest, ActiveLevelEqualsTokenByToken) {
  std::mt19937 rng(16);
  const Cache cache = make_cache(rng, 160, 2, 64);
  for (int64_t group : {1, 4})
    for (int32_t first : {0, 60}) {
      const TokenRun run = make_run(rng, consecutive_positions(first, 12), group, 64);
      EXPECT_EQ(first_differing_token(run_tokens(public_attention_tokens, run, cache, 64),
                                      run_token_by_token(kernel_table().isa, run, cache, 64), run.out_stride),
                -1)
          << "group " << group << " first position " << first;
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
