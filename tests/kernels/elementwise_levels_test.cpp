// Every CPU level's RMSNorm and RoPE (kernel_table(isa).rmsnorm / .rope) against float64
// computations written out here, over many row lengths, head shapes and positions. Inputs end
// at a page the process may not touch, so a kernel reading (or writing) past a row faults;
// outputs carry guard values past n. Levels this CPU lacks are listed and skipped.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernel_table.h"
#include "support/cpu_levels.h"
#include "support/guarded_floats.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

constexpr float kGuard = -12345.5f;  // written past the outputs; must survive

std::vector<int64_t> rmsnorm_lengths() {
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 70; ++n) lengths.push_back(n);
  for (int64_t n : {95, 127, 128, 129, 255, 257, 1000, 1023, 2048, 4095, 4096, 5632, 8193}) lengths.push_back(n);
  return lengths;
}

TEST(ElementwiseLevels, TableHoldsEveryLevelsKernels) {
  EXPECT_EQ(kernel_table(Isa::Scalar).rmsnorm, &rmsnorm_row);  // the portable loops are the scalar level
  EXPECT_EQ(kernel_table(Isa::Scalar).rope, &rope_apply);
  for (Isa isa : supported_levels()) {
    EXPECT_NE(kernel_table(isa).rmsnorm, nullptr) << isa_name(isa);
    EXPECT_NE(kernel_table(isa).rope, nullptr) << isa_name(isa);
  }
}

// out[i] against x[i] * w[i] / sqrt(mean(x²) + eps) in float64, 1e-6 relative; nothing
// read past n (the inputs end at an inaccessible page) or written past it (guards); in place
// gives the same bits.
TEST(ElementwiseLevels, RmsnormMatchesFloat64Reference) {
  std::mt19937 rng(11);
  for (Isa isa : supported_levels()) {
    const RmsnormFn rmsnorm = kernel_table(isa).rmsnorm;
    for (int64_t n : rmsnorm_lengths())
      for (float scale : {1e-3f, 1.0f, 1e3f}) {
        const float eps = 1e-5f;
        std::vector<float> values = random_floats(rng, n, -scale, scale);
        if (n > 8) values[static_cast<size_t>(n / 3)] = 40.0f * scale;  // one outlier, as real activations have
        GuardedFloats x(values), weight(random_floats(rng, n, 0.5f, 1.5f));

        double sum_squares = 0.0;
        for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
        const double inv_rms = 1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps);

        std::vector<float> out(static_cast<size_t>(n + 16), kGuard);
        rmsnorm(x.data(), weight.data(), n, eps, out.data());
        const std::string what = fmt::format("{} n {} scale {}", isa_name(isa), n, scale);
        for (int64_t i = 0; i < n; ++i) {
          const double expected = static_cast<double>(x[i]) * inv_rms * weight[i];
          ASSERT_NEAR(out[i], expected, 1e-6 * std::fabs(expected) + 1e-30) << what << " at " << i;
        }
        for (int64_t i = n; i < n + 16; ++i) ASSERT_TRUE(same_bits(out[i], kGuard)) << what << " wrote past n at " << i;

        // In place (out aliasing x), as the forward pass runs the final norm.
        GuardedFloats in_place(values);
        rmsnorm(in_place.data(), weight.data(), n, eps, in_place.data());
        for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(same_bits(in_place[i], out[i])) << what << " in place at " << i;
      }
  }
}

// A row's bits depend only on the row: the same values at any address (other rows of a
// batch, other alignments) give the same result.
TEST(ElementwiseLevels, RmsnormRowBitsIndependentOfPlacement) {
  std::mt19937 rng(12);
  for (Isa isa : supported_levels()) {
    const RmsnormFn rmsnorm = kernel_table(isa).rmsnorm;
    for (int64_t n : {5, 33, 100, 2048, 5632}) {
      const std::vector<float> row = random_floats(rng, n, -2.0f, 2.0f), weight = random_floats(rng, n, 0.5f, 1.5f);
      std::vector<float> alone(static_cast<size_t>(n));
      rmsnorm(row.data(), weight.data(), n, 1e-6f, alone.data());
      for (int64_t offset : {1, 3, 7, 16}) {
        // The row as row 2 of a batch of 4 at a shifted offset, each row normed on its own.
        std::vector<float> batch = random_floats(rng, offset + 4 * n, -2.0f, 2.0f), out(batch.size());
        std::copy(row.begin(), row.end(), batch.begin() + offset + 2 * n);
        for (int64_t r = 0; r < 4; ++r)
          rmsnorm(batch.data() + offset + r * n, weight.data(), n, 1e-6f, out.data() + offset + r * n);
        for (int64_t i = 0; i < n; ++i)
          ASSERT_TRUE(same_bits(out[static_cast<size_t>(offset + 2 * n + i)], alone[static_cast<size_t>(i)]))
              << isa_name(isa) << " n " << n << " offset " << offset << " at " << i;
      }
    }
  }
}

// Each pair (2i, 2i+1), i < rope_dims/2, rotated by the tables' (cos, sin) against the same
// rotation in float64; dims from 2 * (rope_dims/2) on keep their bits; position 0 changes
// nothing. The last head and both tables end at an inaccessible page.
TEST(ElementwiseLevels, RopeMatchesFloat64Reference) {
  std::mt19937 rng(13);
  struct Shape {
    int64_t head_dim, rope_dims;
  };
  const std::vector<Shape> shapes = {
      {64, 64}, {128, 128}, {96, 96}, {64, 32}, {128, 64}, {96, 48}, {96, 80}, {128, 126}, {64, 62},
      {64, 2},  {64, 5},    {96, 30}, {8, 8},   {6, 6},    {2, 2},   {10, 7},  {128, 100}, {80, 80},
  };
  for (Isa isa : supported_levels()) {
    const RopeFn rope = kernel_table(isa).rope;
    for (const Shape& shape : shapes)
      for (int64_t n_heads : {1, 3, 8})
        for (int64_t position : {0, 1, 17, 1000, 32767}) {
          const int64_t half = shape.rope_dims / 2, width = n_heads * shape.head_dim;
          std::vector<float> cos_values(static_cast<size_t>(half)), sin_values(cos_values.size());
          rope_angles(position, shape.rope_dims, 10000.0f, cos_values.data(), sin_values.data());
          GuardedFloats cos_table(cos_values), sin_table(sin_values);
          const std::vector<float> before = random_floats(rng, width, -1.0f, 1.0f);
          GuardedFloats x(before);
          rope(x.data(), n_heads, shape.head_dim, shape.rope_dims, cos_table.data(), sin_table.data());

          const std::string what = fmt::format("{} head_dim {} rope_dims {} heads {} position {}", isa_name(isa),
                                               shape.head_dim, shape.rope_dims, n_heads, position);
          for (int64_t h = 0; h < n_heads; ++h) {
            const int64_t base = h * shape.head_dim;
            for (int64_t i = 0; i < half; ++i) {
              const double a = before[static_cast<size_t>(base + 2 * i)],
                           b = before[static_cast<size_t>(base + 2 * i + 1)];
              const double c = cos_values[static_cast<size_t>(i)], s = sin_values[static_cast<size_t>(i)];
              // A few float roundings of the two products and their sum.
              ASSERT_NEAR(x[base + 2 * i], a * c - b * s, 3e-7 * (std::fabs(a * c) + std::fabs(b * s)) + 1e-30)
                  << what << " head " << h << " pair " << i;
              ASSERT_NEAR(x[base + 2 * i + 1], a * s + b * c, 3e-7 * (std::fabs(a * s) + std::fabs(b * c)) + 1e-30)
                  << what << " head " << h << " pair " << i;
            }
            for (int64_t d = 2 * half; d < shape.head_dim; ++d)
              ASSERT_TRUE(same_bits(x[base + d], before[static_cast<size_t>(base + d)]))
                  << what << " head " << h << " dim " << d << " past rope_dims changed";
          }
          if (position == 0) {
            for (int64_t i = 0; i < width; ++i)
              ASSERT_TRUE(same_bits(x[i], before[static_cast<size_t>(i)])) << what << " position 0 changed " << i;
          }
        }
  }
}

// Heads of a batch's Q rows (several tokens, each its own tables) rotated in one call per
// token give the bits of each head rotated alone.
TEST(ElementwiseLevels, RopeHeadBitsIndependentOfBatch) {
  std::mt19937 rng(14);
  for (Isa isa : supported_levels()) {
    const RopeFn rope = kernel_table(isa).rope;
    const int64_t head_dim = 96, rope_dims = 80, n_heads = 5, half = rope_dims / 2;
    std::vector<float> cos_table(static_cast<size_t>(half)), sin_table(cos_table.size());
    rope_angles(321, rope_dims, 500000.0f, cos_table.data(), sin_table.data());
    const std::vector<float> heads = random_floats(rng, n_heads * head_dim, -3.0f, 3.0f);
    std::vector<float> together = heads;
    rope(together.data(), n_heads, head_dim, rope_dims, cos_table.data(), sin_table.data());
    for (int64_t h = 0; h < n_heads; ++h) {
      std::vector<float> alone(heads.begin() + h * head_dim, heads.begin() + (h + 1) * head_dim);
      rope(alone.data(), 1, head_dim, rope_dims, cos_table.data(), sin_table.data());
      for (int64_t d = 0; d < head_dim; ++d)
        ASSERT_TRUE(same_bits(alone[static_cast<size_t>(d)], together[static_cast<size_t>(h * head_dim + d)]))
            << isa_name(isa) << " head " << h << " dim " << d;
    }
  }
}

}  // namespace
}  // namespace tandem
