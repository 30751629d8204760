// Optimized kernels against the scalar reference (src/kernels/ref) and plain double
// computations: matmul for every computable weight type over odd shapes and thread counts,
// its batch invariance (a row's bits never depend on its batch or the thread split), and the
// row kernels — RMSNorm, RoPE, SwiGLU, softmax, dot — and attention_head.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/quant.h"
#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/dot.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/ref/reference_kernels.h"

namespace tandem {
namespace {

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float low = -1.0f, float high = 1.0f) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = uniform(rng);
  return values;
}

// A weight matrix [n_out, n_in] stored as `dtype`, with its dequantized floats.
struct StoredWeights {
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;  // [n_out, n_in]
  TensorView view;
};

StoredWeights make_weights(std::mt19937& rng, DType dtype, int64_t n_out, int64_t n_in) {
  StoredWeights w;
  const std::vector<float> values = random_floats(rng, n_out * n_in);
  const int64_t row_bytes = dtype_row_bytes(dtype, n_in);
  w.bytes.resize(static_cast<size_t>(n_out * row_bytes));
  w.dequantized.resize(values.size());
  for (int64_t r = 0; r < n_out; ++r) {
    quantize_row(dtype, values.data() + r * n_in, w.bytes.data() + r * row_bytes, n_in);
    dequantize_row(dtype, w.bytes.data() + r * row_bytes, w.dequantized.data() + r * n_in, n_in);
  }
  w.view = make_view(w.bytes.data(), dtype, {n_out, n_in});
  return w;
}

// What the quantized dot products actually consume: x through 8-bit blocks and back.
std::vector<float> q8_round_trip(const float* x, int64_t n_tokens, int64_t n_in) {
  std::vector<ActivationBlockQ8> blocks(static_cast<size_t>(n_in / 32));
  std::vector<float> out(static_cast<size_t>(n_tokens * n_in));
  for (int64_t t = 0; t < n_tokens; ++t) {
    quantize_activations_q8(x + t * n_in, n_in, blocks.data());
    for (int64_t c = 0; c < n_in; ++c) out[t * n_in + c] = blocks[c / 32].scale * blocks[c / 32].quants[c % 32];
  }
  return out;
}

const DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

bool bits_equal(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// ---- matmul ----

TEST(MatmulTest, MatchesReferenceForEveryType) {
  std::mt19937 rng(1);
  ThreadPool one(1), two(2);
  MatmulScratch scratch;
  for (DType dtype : kAllTypes) {
    const bool quantized = uses_q8_activations(dtype);
    std::vector<int64_t> widths = {32, 64, 96, 320};
    if (!quantized) widths.insert(widths.end(), {1, 17, 45});
    for (int64_t n_in : widths)
      for (int64_t n_out : {1, 7, 33, 100})
        for (int64_t n_tokens : {1, 3, 17, 64}) {
          const StoredWeights w = make_weights(rng, dtype, n_out, n_in);
          // One float past an aligned start: the kernels must not assume aligned activations.
          std::vector<float> storage = random_floats(rng, n_tokens * n_in + 1);
          const float* x = storage.data() + 1;
          const std::vector<float> x_seen =
              quantized ? q8_round_trip(x, n_tokens, n_in) : std::vector<float>(x, x + n_tokens * n_in);
          std::vector<float> expected(static_cast<size_t>(n_tokens * n_out));
          ref::matmul(w.view, x_seen.data(), n_tokens, expected.data());
          for (ThreadPool* pool : {&one, &two}) {
            std::vector<float> out(expected.size(), NAN);
            matmul(w.view, x, n_tokens, out.data(), *pool, scratch);
            const std::string what = fmt::format("{} [{} x {}] x {} tokens, {} threads", dtype_name(dtype), n_out, n_in,
                                                 n_tokens, pool->size());
            for (int64_t t = 0; t < n_tokens; ++t)
              for (int64_t r = 0; r < n_out; ++r) {
                // Float accumulation error scales with the sum of the terms' magnitudes.
                double magnitude = 0.0;
                for (int64_t c = 0; c < n_in; ++c)
                  magnitude += std::fabs(static_cast<double>(w.dequantized[r * n_in + c]) * x_seen[t * n_in + c]);
                const size_t i = static_cast<size_t>(t * n_out + r);
                ASSERT_NEAR(out[i], expected[i], 1e-5 * magnitude + 1e-30) << what << " at token " << t << " row " << r;
              }
          }
        }
  }
}

// The same matmul against the exact product (no activation quantization): Q8_0/Q4_0 stay
// within what 8-bit activations can cost, a guard on the emulation used above.
TEST(MatmulTest, QuantizedTypesNearExactProduct) {
  std::mt19937 rng(2);
  ThreadPool pool(2);
  MatmulScratch scratch;
  for (DType dtype : {DType::Q8_0, DType::Q4_0}) {
    const int64_t n_out = 33, n_in = 320, n_tokens = 5;
    const StoredWeights w = make_weights(rng, dtype, n_out, n_in);
    const std::vector<float> x = random_floats(rng, n_tokens * n_in);
    std::vector<float> out(static_cast<size_t>(n_tokens * n_out)), expected(out.size());
    matmul(w.view, x.data(), n_tokens, out.data(), pool, scratch);
    ref::matmul(w.view, x.data(), n_tokens, expected.data());
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t t = static_cast<int64_t>(i) / n_out, r = static_cast<int64_t>(i) % n_out;
      // Each activation is off by at most half a step of its block's scale (amax / 127).
      double bound = 1e-6;
      for (int64_t b = 0; b < n_in / 32; ++b) {
        float amax = 0.0f, weight_sum = 0.0f;
        for (int64_t c = b * 32; c < (b + 1) * 32; ++c) {
          amax = std::max(amax, std::fabs(x[t * n_in + c]));
          weight_sum += std::fabs(w.dequantized[r * n_in + c]);
        }
        bound += 0.5 * amax / 127.0 * weight_sum;
      }
      EXPECT_NEAR(out[i], expected[i], bound) << dtype_name(dtype) << " element " << i;
    }
  }
}

// Row t of a batch of n equals, bit for bit, the same row computed alone — with 1 or 2 threads.
TEST(MatmulTest, BatchInvariant) {
  std::mt19937 rng(3);
  ThreadPool one(1), two(2);
  MatmulScratch scratch;
  for (DType dtype : kAllTypes) {
    const int64_t n_out = 37, n_in = 96;
    const StoredWeights w = make_weights(rng, dtype, n_out, n_in);
    const std::vector<float> x = random_floats(rng, 64 * n_in);
    std::vector<float> alone(static_cast<size_t>(64 * n_out));
    for (int64_t t = 0; t < 64; ++t) matmul(w.view, x.data() + t * n_in, 1, alone.data() + t * n_out, one, scratch);
    for (int64_t n_tokens : {1, 2, 3, 5, 16, 17, 33, 64})
      for (ThreadPool* pool : {&one, &two}) {
        std::vector<float> batched(static_cast<size_t>(n_tokens * n_out));
        matmul(w.view, x.data(), n_tokens, batched.data(), *pool, scratch);
        for (int64_t t = 0; t < n_tokens; ++t)
          EXPECT_TRUE(bits_equal(batched.data() + t * n_out, alone.data() + t * n_out, n_out))
              << dtype_name(dtype) << " row " << t << " of " << n_tokens << " with " << pool->size() << " threads";
      }
  }
}

// ---- row kernels ----

TEST(DotTest, F32MatchesDoubleAtEveryLengthAndOffset) {
  std::mt19937 rng(4);
  const std::vector<float> a = random_floats(rng, 200), b = random_floats(rng, 200);
  for (int64_t offset : {0, 1, 3})
    for (int64_t n = 0; n <= 130; ++n) {
      double expected = 0.0, magnitude = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        expected += static_cast<double>(a[offset + i]) * b[offset + i];
        magnitude += std::fabs(static_cast<double>(a[offset + i]) * b[offset + i]);
      }
      EXPECT_NEAR(dot_f32(a.data() + offset, b.data() + offset, n), expected, 1e-6 * magnitude)
          << "n " << n << " offset " << offset;
    }
}

TEST(RmsnormTest, MatchesReference) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 7, 48, 64, 333, 4096})
    for (float scale : {1e-3f, 1.0f, 1e3f})
      for (float eps : {1e-5f, 1e-6f}) {
        const std::vector<float> x = random_floats(rng, n, -scale, scale), weight = random_floats(rng, n, 0.5f, 1.5f);
        std::vector<float> out(static_cast<size_t>(n)), expected(out.size());
        rmsnorm_row(x.data(), weight.data(), n, eps, out.data());
        ref::rmsnorm(x.data(), weight.data(), n, eps, expected.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_NEAR(out[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-30)
              << "n " << n << " scale " << scale << " eps " << eps << " at " << i;
        // In place (out aliasing x), as the forward pass uses it for the final norm.
        std::vector<float> in_place = x;
        rmsnorm_row(in_place.data(), weight.data(), n, eps, in_place.data());
        EXPECT_TRUE(bits_equal(in_place.data(), out.data(), n));
      }
}

TEST(RopeTest, AnglesAndApplyMatchReference) {
  std::mt19937 rng(6);
  const int64_t n_heads = 3;
  for (int64_t head_dim : {8, 16, 64})
    for (int64_t rope_dims : {head_dim, head_dim / 2, int64_t{2}})
      for (float base : {10000.0f, 500000.0f})
        for (int64_t position : {0, 1, 7, 100, 4095, 131071}) {
          const std::vector<float> x = random_floats(rng, n_heads * head_dim);
          std::vector<float> cos_table(static_cast<size_t>(rope_dims / 2)), sin_table(cos_table.size());
          rope_angles(position, rope_dims, base, cos_table.data(), sin_table.data());
          std::vector<float> out = x, expected = x;
          rope_apply(out.data(), n_heads, head_dim, rope_dims, cos_table.data(), sin_table.data());
          ref::rope(expected.data(), n_heads, head_dim, rope_dims, position, base);
          const std::string what =
              fmt::format("head_dim {} rope_dims {} base {} position {}", head_dim, rope_dims, base, position);
          for (int64_t h = 0; h < n_heads; ++h)
            for (int64_t i = 0; i < head_dim; ++i) {
              const size_t k = static_cast<size_t>(h * head_dim + i);
              if (i >= rope_dims)  // past the rotary part: untouched
                ASSERT_EQ(std::memcmp(&out[k], &x[k], sizeof(float)), 0) << what << " dim " << i;
              else
                ASSERT_NEAR(out[k], expected[k], 1e-6) << what << " head " << h << " dim " << i;  // |x| <= 1
            }
          if (position == 0) {
            EXPECT_TRUE(bits_equal(out.data(), x.data(), n_heads * head_dim)) << what;
          }
        }
}

TEST(SwigluTest, MatchesReference) {
  std::mt19937 rng(7);
  std::vector<float> gate = random_floats(rng, 1000, -20.0f, 20.0f);
  gate.insert(gate.end(), {-100.0f, -88.0f, -1e-3f, 0.0f, 1e-3f, 88.0f, 100.0f});
  const auto n = static_cast<int64_t>(gate.size());
  const std::vector<float> up = random_floats(rng, n, -3.0f, 3.0f);
  std::vector<float> out(gate.size()), expected(gate.size());
  swiglu_row(gate.data(), up.data(), n, out.data());
  ref::swiglu(gate.data(), up.data(), n, expected.data());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(out[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-30) << "gate " << gate[i] << " up " << up[i];
  // In place over gate, as the forward pass uses it.
  std::vector<float> in_place = gate;
  swiglu_row(in_place.data(), up.data(), n, in_place.data());
  EXPECT_TRUE(bits_equal(in_place.data(), out.data(), n));
}

TEST(SoftmaxTest, SumsToOneAndMatchesDouble) {
  std::mt19937 rng(8);
  std::vector<std::vector<float>> inputs;
  for (int64_t n : {1, 2, 7, 100, 1000}) inputs.push_back(random_floats(rng, n, -10.0f, 10.0f));
  inputs.push_back(random_floats(rng, 50, 1000.0f, 1010.0f));  // large values: needs the max shift
  inputs.push_back(std::vector<float>(33, 3.5f));              // all equal: uniform
  std::vector<float> masked = random_floats(rng, 20);
  masked[0] = masked[7] = -INFINITY;
  inputs.push_back(masked);
  for (const std::vector<float>& x : inputs) {
    const auto n = static_cast<int64_t>(x.size());
    std::vector<float> out = x;
    softmax_row(out.data(), n);
    const double max_value = *std::max_element(x.begin(), x.end());
    double denominator = 0.0;
    for (float v : x) denominator += std::exp(static_cast<double>(v) - max_value);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const double expected = std::exp(static_cast<double>(x[i]) - max_value) / denominator;
      ASSERT_NEAR(out[i], expected, 1e-6 * expected + 1e-12) << "n " << n << " at " << i;
      sum += out[i];
    }
    EXPECT_NEAR(sum, 1.0, 1e-6) << "n " << n;
    if (x == masked) {
      EXPECT_TRUE(out[0] == 0.0f && out[7] == 0.0f);
    }
  }
}

// attention_head against a plain double computation, reading K/V through a shuffled slot
// table (positions scattered over the pool, as paged storage leaves them).
TEST(AttentionTest, HeadMatchesDoubleThroughShuffledSlots) {
  std::mt19937 rng(9);
  const int64_t n_slots = 64, n_kv_heads = 3;
  for (int64_t head_dim : {8, 16, 33, 64})
    for (float q_scale : {1.0f, 4.0f}) {
      const int64_t kv_width = n_kv_heads * head_dim;
      const std::vector<float> keys = random_floats(rng, n_slots * kv_width);
      const std::vector<float> values = random_floats(rng, n_slots * kv_width);
      std::vector<int32_t> slots(static_cast<size_t>(n_slots));
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      for (int64_t kv_head = 0; kv_head < n_kv_heads; ++kv_head)
        for (int64_t n_ctx : {1, 2, 5, 40, 64}) {
          const int64_t offset = kv_head * head_dim;
          const std::vector<float> q = random_floats(rng, head_dim, -q_scale, q_scale);
          std::vector<float> scores(static_cast<size_t>(n_ctx)), out(static_cast<size_t>(head_dim));
          attention_head(q.data(), f32_kv_rows(keys.data(), kv_width), f32_kv_rows(values.data(), kv_width), offset,
                         slots.data(), n_ctx, head_dim, scores.data(), out.data());

          std::vector<double> weights(static_cast<size_t>(n_ctx));
          double max_score = -INFINITY, denominator = 0.0;
          for (int64_t p = 0; p < n_ctx; ++p) {
            const float* k = keys.data() + slots[p] * kv_width + offset;
            double dot = 0.0;
            for (int64_t i = 0; i < head_dim; ++i) dot += static_cast<double>(q[i]) * k[i];
            weights[p] = dot / std::sqrt(static_cast<double>(head_dim));
            max_score = std::max(max_score, weights[p]);
          }
          for (double& w : weights) denominator += (w = std::exp(w - max_score));
          for (int64_t i = 0; i < head_dim; ++i) {
            double expected = 0.0;
            for (int64_t p = 0; p < n_ctx; ++p)
              expected += weights[p] / denominator * values[slots[p] * kv_width + offset + i];
            ASSERT_NEAR(out[i], expected, 1e-5)  // |v| <= 1
                << "head_dim " << head_dim << " kv_head " << kv_head << " n_ctx " << n_ctx << " dim " << i;
          }
        }
    }
}

}  // namespace
}  // namespace tandem
