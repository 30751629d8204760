// The AVX2 level's own kernels (kernels/avx2/avx2_kernels.h) against references: the vector
// exp against std::exp; swiglu_row against a double computation; the activation quantizers
// byte for byte against the scalar ones; attention_group against a double computation over
// head sizes, context lengths, GQA groups and a shuffled, padded KV cache, and its batch
// invariance (a query alone equals the same query in any group, a token through
// attention_tokens equals the same token alone). Skipped on CPUs without AVX2.
#include <gtest/gtest.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"
#include "kernels/kernel_table.h"

// The vector exp is an inline header for AVX2 code: this helper is compiled for AVX2 and FMA
// and only called after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif
#include "kernels/avx2/vector_exp.h"

namespace tandem {
namespace {

// out[i] = avx2::exp_nonpositive(x[i]), 8 at a time, the tail through a padded vector.
void exp_row_avx2(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 8) {
    alignas(32) float in[8] = {}, result[8];
    std::copy_n(x + i, std::min<int64_t>(8, n - i), in);
    _mm256_store_ps(result, avx2::exp_nonpositive(_mm256_load_ps(in)));
    std::copy_n(result, std::min<int64_t>(8, n - i), out + i);
  }
}

}  // namespace
}  // namespace tandem

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace tandem {
namespace {

bool has_avx2() { return static_cast<int>(detect_isa()) >= static_cast<int>(Isa::Avx2); }

#define SKIP_WITHOUT_AVX2() \
  if (!has_avx2()) GTEST_SKIP() << "no AVX2 + FMA on this machine"

std::vector<float> uniform_floats(std::mt19937& rng, int64_t n, float low, float high) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = uniform(rng);
  return values;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// |got - exact| in units of the float spacing at exact.
double ulp_error(float got, double exact) {
  int exponent;
  std::frexp(exact, &exponent);
  const double ulp = std::ldexp(1.0, std::max(exponent - 24, -149));
  return std::abs(got - exact) / ulp;
}

// ---- Vector exp ---------------------------------------------------------------------------

TEST(Avx2VectorExpTest, MatchesStdExpWithin2Ulp) {
  SKIP_WITHOUT_AVX2();
  std::vector<float> x;
  for (float v = -90.0f; v <= 0.0f; v += 1.0f / 4096.0f) x.push_back(v);
  x.push_back(-87.0f);
  x.push_back(-std::numeric_limits<float>::min());
  x.push_back(-std::numeric_limits<float>::denorm_min());
  std::vector<float> out(x.size());
  exp_row_avx2(x.data(), static_cast<int64_t>(x.size()), out.data());
  double worst = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] < -87.0f) {
      ASSERT_EQ(out[i], 0.0f) << "x " << x[i];  // kept normal: below exp(-87) the result is 0
      continue;
    }
    ASSERT_TRUE(std::isnormal(out[i])) << "x " << x[i];
    worst = std::max(worst, ulp_error(out[i], std::exp(static_cast<double>(x[i]))));
  }
  EXPECT_LE(worst, 2.0);
}

TEST(Avx2VectorExpTest, SpecialValues) {
  SKIP_WITHOUT_AVX2();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> x = {
      0.0f, -0.0f, -INFINITY, nan, -87.0f, -87.0001f, -88.0f, -1e6f, -std::numeric_limits<float>::max(), -0.5f};
  std::vector<float> out(x.size(), 7.0f);
  exp_row_avx2(x.data(), static_cast<int64_t>(x.size()), out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[2], 0.0f);  // -inf: masked positions, the first tile's correction
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_GT(out[4], 1.6e-38f);
  for (size_t i = 5; i < 9; ++i) EXPECT_EQ(out[i], 0.0f) << "x " << x[i];
  EXPECT_LE(ulp_error(out[9], std::exp(-0.5)), 2.0);
}

// ---- SwiGLU -------------------------------------------------------------------------------

// n floats ending exactly at a page that may not be read, so that a read past n faults.
class GuardedFloats {
 public:
  explicit GuardedFloats(int64_t n) : n_(n) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = (static_cast<size_t>(n) * sizeof(float) + page_ - 1) / page_ * page_ + page_;
    base_ = static_cast<char*>(mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(mprotect(base_ + bytes_ - page_, page_, PROT_NONE), 0);
  }
  ~GuardedFloats() { munmap(base_, bytes_); }
  GuardedFloats(const GuardedFloats&) = delete;
  GuardedFloats& operator=(const GuardedFloats&) = delete;
  float* data() { return reinterpret_cast<float*>(base_ + bytes_ - page_) - n_; }

 private:
  int64_t n_;
  size_t page_ = 0, bytes_ = 0;
  char* base_ = nullptr;
};

TEST(Avx2SwigluTest, MatchesDoubleForEverySize) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(21);
  for (int64_t n = 1; n <= 70; ++n) {
    GuardedFloats gate(n), up(n), out(n);
    const std::vector<float> g = uniform_floats(rng, n, -20.0f, 20.0f), u = uniform_floats(rng, n, -3.0f, 3.0f);
    std::copy(g.begin(), g.end(), gate.data());
    std::copy(u.begin(), u.end(), up.data());
    if (n > 2) gate.data()[1] = 0.0f, gate.data()[2] = -100.0f;  // sigmoid 1/2; exp(-100) below the flush
    avx2::swiglu_row(gate.data(), up.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const double x = gate.data()[i];
      const double expected = x / (1.0 + std::exp(-x)) * up.data()[i];
      ASSERT_NEAR(out.data()[i], expected, 6e-7 * std::abs(expected) + 1e-37) << "n " << n << " i " << i;
    }
  }
}

TEST(Avx2SwigluTest, WritesNothingPastN) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(22);
  for (int64_t n : {1, 7, 9, 13, 31}) {
    const std::vector<float> gate = uniform_floats(rng, n + 1, -5.0f, 5.0f),
                             up = uniform_floats(rng, n + 1, -1.0f, 1.0f);
    std::vector<float> out(static_cast<size_t>(n + 16), 7.0f);
    avx2::swiglu_row(gate.data() + 1, up.data() + 1, n, out.data() + 1);  // misaligned
    EXPECT_EQ(out[0], 7.0f);
    for (int64_t i = n + 1; i < n + 16; ++i) EXPECT_EQ(out[i], 7.0f) << "n " << n << " i " << i;
    for (int64_t i = 1; i <= n; ++i) EXPECT_NE(out[i], 7.0f);
  }
}

// ---- Activation quantizers ----------------------------------------------------------------

// Blocks of block_size floats of several kinds: random at several magnitudes, exact ties
// once the block maximum makes the step exact, zeros, huge and tiny values, one outlier.
std::vector<float> quantizer_input(std::mt19937& rng, int64_t block_size) {
  std::vector<float> x;
  auto add_block = [&](auto&& make) {
    for (int64_t i = 0; i < block_size; ++i) x.push_back(make(i));
  };
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> exponent(-30.0f, 30.0f);
  std::uniform_int_distribution<int> step(-254, 254);
  for (float scale : {1.0f, 1e-30f, 3e4f}) add_block([&](int64_t) { return scale * normal(rng); });
  add_block([&](int64_t) { return (normal(rng) < 0 ? -1.0f : 1.0f) * std::exp2(exponent(rng)); });
  // Maximum 127: step 1, and every x = k + 0.5 is an exact tie (to even: 2.5 -> 2, 3.5 -> 4).
  add_block([&](int64_t i) { return i == 5 ? -127.0f : static_cast<float>(step(rng)) * 0.5f; });
  // Maximum 63.5: step 0.5 (the K-quantizer's inverse 2 and the Q8 inverse 1 / 0.5 are exact).
  add_block([&](int64_t i) { return i == 0 ? 63.5f : static_cast<float>(step(rng)) * 0.25f; });
  add_block([](int64_t i) { return i % 3 == 0 ? -0.0f : 0.0f; });
  add_block([&](int64_t i) { return std::numeric_limits<float>::max() * std::tanh(normal(rng)); });
  add_block([&](int64_t) { return 1e-36f * normal(rng); });  // a scale below the normal range
  add_block([&](int64_t i) { return i == block_size / 2 ? 1e6f : normal(rng); });
  return x;
}

TEST(Avx2QuantizeTest, Q8WritesTheScalarBytes) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(31);
  for (int repeat = 0; repeat < 20; ++repeat) {
    std::vector<float> x = quantizer_input(rng, 32);
    x.insert(x.begin(), 0.0f);  // read from x + 1: misaligned
    const int64_t n = static_cast<int64_t>(x.size()) - 1, n_blocks = n / 32;
    std::vector<ActivationBlockQ8> expected(static_cast<size_t>(n_blocks)), got(static_cast<size_t>(n_blocks));
    std::memset(expected.data(), 0x55, expected.size() * sizeof(ActivationBlockQ8));
    std::memset(got.data(), 0xaa, got.size() * sizeof(ActivationBlockQ8));
    quantize_activations_q8_isa(Isa::Scalar, x.data() + 1, n, expected.data());
    avx2::quantize_q8(x.data() + 1, n, got.data());
    for (int64_t b = 0; b < n_blocks; ++b) {
      EXPECT_TRUE(same_bits(got[b].scale, expected[b].scale)) << "block " << b;
      EXPECT_EQ(std::memcmp(got[b].quants, expected[b].quants, 32), 0) << "block " << b;
    }
  }
}

TEST(Avx2QuantizeTest, Q8KWritesTheScalarBytes) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(32);
  for (int repeat = 0; repeat < 5; ++repeat) {
    std::vector<float> x = quantizer_input(rng, 256);
    x.insert(x.begin(), 0.0f);
    const int64_t n = static_cast<int64_t>(x.size()) - 1, n_blocks = n / 256;
    std::vector<ActivationBlockQ8K> expected(static_cast<size_t>(n_blocks)), got(static_cast<size_t>(n_blocks));
    std::memset(expected.data(), 0x55, expected.size() * sizeof(ActivationBlockQ8K));
    std::memset(got.data(), 0xaa, got.size() * sizeof(ActivationBlockQ8K));
    quantize_activations_q8k_isa(Isa::Scalar, x.data() + 1, n, expected.data());
    avx2::quantize_q8k(x.data() + 1, n, got.data());
    for (int64_t b = 0; b < n_blocks; ++b) {
      EXPECT_TRUE(same_bits(got[b].scale, expected[b].scale)) << "block " << b;
      EXPECT_EQ(std::memcmp(got[b].quants, expected[b].quants, 256), 0) << "block " << b;
      EXPECT_EQ(std::memcmp(got[b].block_sums, expected[b].block_sums, 32), 0) << "block " << b;
    }
  }
}

// A NaN input is skipped by the maximum (fmax / std::max keep the running value), so the
// block's scale and its other elements are as without it.
TEST(Avx2QuantizeTest, NanDoesNotChangeTheScale) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(33);
  std::vector<float> x = uniform_floats(rng, 256, -2.0f, 2.0f);
  for (int64_t nan_at : {0, 9, 31, 200}) {
    std::vector<float> poisoned = x;
    poisoned[nan_at] = std::numeric_limits<float>::quiet_NaN();
    ActivationBlockQ8 expected[8], got[8];
    quantize_activations_q8_isa(Isa::Scalar, poisoned.data(), 256, expected);
    avx2::quantize_q8(poisoned.data(), 256, got);
    for (int b = 0; b < 8; ++b) {
      EXPECT_TRUE(same_bits(got[b].scale, expected[b].scale)) << "block " << b;
      for (int i = 0; i < 32; ++i)
        if (b * 32 + i != nan_at) {
          EXPECT_EQ(got[b].quants[i], expected[b].quants[i]) << "block " << b << " i " << i;
        }
    }
    ActivationBlockQ8K expected_k, got_k;
    quantize_activations_q8k_isa(Isa::Scalar, poisoned.data(), 256, &expected_k);
    avx2::quantize_q8k(poisoned.data(), 256, &got_k);
    EXPECT_TRUE(same_bits(got_k.scale, expected_k.scale));
    for (int i = 0; i < 256; ++i)
      if (i != nan_at) {
        EXPECT_EQ(got_k.quants[i], expected_k.quants[i]) << "i " << i;
      }
  }
}

// ---- Attention ----------------------------------------------------------------------------

// A KV cache of n_slots rows holding n_kv_heads heads with padding after them (kv_width past
// the heads, as KvCache::row_bytes may be), and a shuffled position -> slot table.
struct Cache {
  int64_t head_dim, kv_width;
  std::vector<float> keys, values;  // [n_slots, kv_width]
  std::vector<int32_t> slots;       // [n_slots]
};

Cache make_cache(std::mt19937& rng, int64_t n_slots, int64_t n_kv_heads, int64_t head_dim) {
  const int64_t kv_width = n_kv_heads * head_dim + 5;
  Cache cache{head_dim, kv_width, uniform_floats(rng, n_slots * kv_width, -1.0f, 1.0f),
              uniform_floats(rng, n_slots * kv_width, -1.0f, 1.0f), std::vector<int32_t>(n_slots)};
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

using GroupKernel = AttentionFn;

std::vector<float> run_group(GroupKernel kernel, const float* queries, int64_t n_queries, const Cache& cache,
                             int64_t kv_offset, int64_t n_ctx) {
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_queries * cache.head_dim));
  kernel(queries, n_queries, f32_kv_rows(cache.keys.data(), cache.kv_width),
         f32_kv_rows(cache.values.data(), cache.kv_width), kv_offset, cache.slots.data(), n_ctx, cache.head_dim,
         scratch.data(), out.data(), 0.0f, nullptr, nullptr);
  return out;
}

const std::vector<int64_t> kContextLengths = {1, 2, 3, 7, 8, 9, 15, 17, 33, 63, 64, 65, 101, 127, 129, 191, 199, 200};

TEST(Avx2AttentionTest, GroupMatchesDoubleThroughShuffledSlots) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(41);
  const int64_t n_slots = 200, n_kv_heads = 2;
  for (int64_t head_dim : {8, 16, 24, 64, 128})
    for (int64_t group : {1, 2, 3, 4, 8}) {  // 3: a query pair and one left over
      const Cache cache = make_cache(rng, n_slots, n_kv_heads, head_dim);
      // q_bound 1: a flat softmax; 30: one or two positions take nearly all the weight and the
      // running max moves from tile to tile.
      for (float q_bound : {1.0f, 8.0f, 30.0f}) {
        const std::vector<float> queries = uniform_floats(rng, group * head_dim, -q_bound, q_bound);
        for (int64_t n_ctx : kContextLengths) {
          const int64_t kv_offset = (n_ctx % n_kv_heads) * head_dim;
          const std::vector<float> out =
              run_group(avx2::attention_group, queries.data(), group, cache, kv_offset, n_ctx);
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

// Head sizes the vector kernel does not take go to the portable kernel, bit for bit.
TEST(Avx2AttentionTest, OtherHeadSizesFallBackToPortable) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(42);
  for (int64_t head_dim : {4, 12, 20, 264}) {
    const Cache cache = make_cache(rng, 80, 1, head_dim);
    const std::vector<float> queries = uniform_floats(rng, 4 * head_dim, -3.0f, 3.0f);
    for (int64_t n_ctx : {1, 65, 80}) {
      const std::vector<float> got = run_group(avx2::attention_group, queries.data(), 4, cache, 0, n_ctx);
      const std::vector<float> expected = run_group(portable::attention_group, queries.data(), 4, cache, 0, n_ctx);
      EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
          << "head_dim " << head_dim << " n_ctx " << n_ctx;
      const std::vector<double> exact = attention_in_double(queries.data(), cache, 0, n_ctx);
      for (int64_t i = 0; i < head_dim; ++i) ASSERT_NEAR(got[i], exact[i], 1e-5);
    }
  }
}

TEST(Avx2AttentionTest, QueryAloneEqualsQueryInAnyGroup) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(43);
  for (int64_t head_dim : {8, 24, 32, 64, 128}) {
    const Cache cache = make_cache(rng, 200, 1, head_dim);
    for (int64_t n_ctx : kContextLengths) {
      const std::vector<float> queries = uniform_floats(rng, 8 * head_dim, -10.0f, 10.0f);  // [8, head_dim]
      std::vector<float> alone(static_cast<size_t>(8 * head_dim));
      for (int64_t g = 0; g < 8; ++g) {
        const std::vector<float> out =
            run_group(avx2::attention_group, queries.data() + g * head_dim, 1, cache, 0, n_ctx);
        std::copy(out.begin(), out.end(), alone.begin() + g * head_dim);
      }
      for (int64_t size = 2; size <= 8; ++size)
        for (int64_t first = 0; first + size <= 8; ++first) {
          const std::vector<float> out =
              run_group(avx2::attention_group, queries.data() + first * head_dim, size, cache, 0, n_ctx);
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
  const int64_t query_stride = 3 * group * head_dim, out_stride = group * head_dim + 8;
  return TokenRun{group,
                  head_dim,
                  query_stride,
                  out_stride,
                  std::move(positions),
                  uniform_floats(rng, n_tokens * query_stride, -10.0f, 10.0f)};
}

std::vector<int32_t> consecutive_positions(int32_t first, int32_t n_tokens) {
  std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
  std::iota(positions.begin(), positions.end(), first);
  return positions;
}

// The run's outputs [n_tokens, out_stride] from one avx2::attention_tokens call; the gaps
// between rows stay at their initial 7.0f.
std::vector<float> run_tokens(const TokenRun& run, const Cache& cache, int64_t kv_offset) {
  const auto n_tokens = static_cast<int64_t>(run.positions.size());
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(run.group)));
  std::vector<float> out(static_cast<size_t>(n_tokens * run.out_stride), 7.0f);
  avx2::attention_tokens(run.queries.data(), run.query_stride, n_tokens, run.group, run.positions.data(),
                         f32_kv_rows(cache.keys.data(), cache.kv_width),
                         f32_kv_rows(cache.values.data(), cache.kv_width), kv_offset, cache.slots.data(), run.head_dim,
                         scratch.data(), out.data(), run.out_stride, 0.0f, nullptr, nullptr);
  return out;
}

// The same outputs, token by token through avx2::attention_group with n_ctx = position + 1.
std::vector<float> run_token_by_token(const TokenRun& run, const Cache& cache, int64_t kv_offset) {
  const auto n_tokens = static_cast<int64_t>(run.positions.size());
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(run.group)));
  std::vector<float> out(static_cast<size_t>(n_tokens * run.out_stride), 7.0f);
  for (int64_t t = 0; t < n_tokens; ++t)
    avx2::attention_group(
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

// Runs of 1..17 consecutive tokens starting at and around tile (64) and block (8) edges, so
// that tokens' contexts end inside a shared tile, in the same or different blocks; group 1
// (MHA: tokens pair up to share loads), 2, and 5 and 8 (query pairs crossing tokens); head
// sizes with 4, 2 and 1 accumulator chains, and a fallback size.
TEST(Avx2AttentionTest, TokensEqualTokenByToken) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(44);
  const int64_t n_slots = 160, n_kv_heads = 2;
  for (int64_t head_dim : {8, 24, 40, 64, 128, 12}) {
    const Cache cache = make_cache(rng, n_slots, n_kv_heads, head_dim);
    for (int64_t group : {1, 2, 5, 8})
      for (int32_t first : {0, 5, 13, 60, 63, 120, 140})
        for (int32_t n_tokens = 1; n_tokens <= 17; ++n_tokens) {
          const TokenRun run = make_run(rng, consecutive_positions(first, n_tokens), group, head_dim);
          const int64_t kv_offset = (first % n_kv_heads) * head_dim;
          ASSERT_EQ(first_differing_token(run_tokens(run, cache, kv_offset), run_token_by_token(run, cache, kv_offset),
                                          run.out_stride),
                    -1)
              << "head_dim " << head_dim << " group " << group << " positions " << first << ".."
              << first + n_tokens - 1;
        }
  }
}

// Positions a prefill never has but the kernel allows: gaps, repeats, and a run wider than one
// pass over the tiles (more than 128 queries).
TEST(Avx2AttentionTest, TokensWithGapsAndRepeatsEqualTokenByToken) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(45);
  const std::vector<std::vector<int32_t>> runs = {
      {0, 0, 0}, {5, 20, 21, 21, 70, 130, 131}, {63, 64, 65, 127, 128, 129, 199}, consecutive_positions(100, 40)};
  for (int64_t head_dim : {16, 32, 64, 256}) {
    const Cache cache = make_cache(rng, 300, 1, head_dim);
    for (int64_t group : {1, 4, 8})
      for (const std::vector<int32_t>& positions : runs) {
        const TokenRun run = make_run(rng, positions, group, head_dim);
        EXPECT_EQ(first_differing_token(run_tokens(run, cache, 0), run_token_by_token(run, cache, 0), run.out_stride),
                  -1)
            << "head_dim " << head_dim << " group " << group << " from position " << positions.front();
      }
  }
}

// A position only later tokens see holds non-finite K/V (a poisoned row): the tokens before it
// must not be touched by it, though they share its tile, block and loads.
TEST(Avx2AttentionTest, TokensIgnoreRowsPastTheirContext) {
  SKIP_WITHOUT_AVX2();
  std::mt19937 rng(46);
  for (int64_t head_dim : {8, 32, 64, 128}) {
    Cache cache = make_cache(rng, 100, 1, head_dim);
    const int32_t poisoned = 71;
    std::fill_n(cache.values.begin() + cache.slots[poisoned] * cache.kv_width, head_dim, INFINITY);
    std::fill_n(cache.keys.begin() + cache.slots[poisoned] * cache.kv_width, head_dim, NAN);
    for (int64_t group : {1, 3}) {
      const TokenRun run = make_run(rng, consecutive_positions(60, 16), group, head_dim);  // 60..75
      const std::vector<float> together = run_tokens(run, cache, 0);
      const std::vector<float> alone = run_token_by_token(run, cache, 0);
      const size_t clean = static_cast<size_t>((poisoned - 60) * run.out_stride);  // tokens 60..70
      EXPECT_EQ(0, std::memcmp(together.data(), alone.data(), clean * sizeof(float)))
          << "head_dim " << head_dim << " group " << group;
      for (size_t i = 0; i < clean; ++i) ASSERT_TRUE(std::isfinite(together[i])) << "element " << i;
    }
  }
}

}  // namespace
}  // namespace tandem
