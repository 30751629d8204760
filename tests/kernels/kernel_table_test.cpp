// Every instruction-set level's GEMM kernels (kernel_table(isa)) against the double
// reference, and each level's batch invariance: a (row, token) result computed inside any
// row range / token count equals the same pair computed alone, bit for bit. And across
// levels: kernels on the shared packed layouts give the same bits at every level that runs
// them (Q8_0/Q4_0 at AVX2, AVX-512 and AMX; float weights at AVX-512 and AMX).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <tuple>
#include <vector>

#include "base/quant.h"
#include "kernels/kernel_table.h"
#include "kernels/ref/reference_kernels.h"
#include "support/cpu_levels.h"

namespace tandem {
namespace {

struct Case {
  DType dtype;
  int64_t n_out;
  int64_t n_in;
  int64_t n_tokens;
};

void run_gemm(const KernelTable& table, const TensorView& w, int64_t row_begin, int64_t row_end,
              const std::vector<float>& x, const std::vector<ActivationBlockQ8>& qx, int64_t n_tokens,
              std::vector<float>& out) {
  if (uses_q8_activations(w.dtype))
    table.gemm_q8(w, row_begin, row_end, qx.data(), n_tokens, out.data(), w.n_rows());
  else
    table.gemm_float(w, row_begin, row_end, x.data(), n_tokens, out.data(), w.n_rows());
}

TEST(KernelTable, EveryLevelMatchesReferenceAndIsBatchInvariant) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const std::vector<Case> cases = {
      {DType::F32, 9, 45, 5},
      {DType::F32, 33, 64, 9},
      {DType::F16, 7, 17, 6},
      {DType::F16, 21, 96, 4},
      {DType::BF16, 5, 33, 7},
      {DType::Q8_0, 13, 96, 9},
      {DType::Q8_0, 8, 64, 4},
      {DType::Q4_0, 11, 160, 6},
      {DType::Q4_0, 4, 32, 5},
      {DType::Q8_0, 37, 64, 35},
      {DType::Q4_0, 17, 96, 16},
      {DType::Q8_0, 16, 32, 1},
      // Whole 8-row groups (the AVX2 level packs them): several groups, 4-token tiles and a tail.
      {DType::Q4_0, 24, 96, 7},
      {DType::Q8_0, 40, 64, 13},
      {DType::Q4_0, 72, 64, 3},
      {DType::Q8_0, 8, 32, 1},
      // Several 24-token tiles, a padded last tile, and (20000 wide) several token chunks.
      {DType::F16, 19, 200, 53},
      {DType::F32, 17, 64, 26},
      {DType::BF16, 3, 20000, 50},
      // Float prefill tiles of 2 groups x 14 tokens: an odd group left over, a partial tile.
      {DType::F16, 40, 96, 29},
      {DType::BF16, 48, 64, 15},
  };
  for (Isa isa : supported_levels()) {
    const KernelTable& table = kernel_table(isa);
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + std::string(dtype_name(c.dtype)) + " " + std::to_string(c.n_out) +
                   "x" + std::to_string(c.n_in) + " tokens " + std::to_string(c.n_tokens));
      std::vector<float> weights(static_cast<size_t>(c.n_out * c.n_in));
      for (float& v : weights) v = uniform(rng);
      const int64_t row_bytes = dtype_row_bytes(c.dtype, c.n_in);
      std::vector<uint8_t> stored(static_cast<size_t>(c.n_out * row_bytes));
      for (int64_t r = 0; r < c.n_out; ++r)
        quantize_row(c.dtype, weights.data() + r * c.n_in, stored.data() + r * row_bytes, c.n_in);
      TensorView w = make_view(stored.data(), c.dtype, {c.n_out, c.n_in});
      const std::vector<uint8_t> packed = pack_for_level(table, w);  // as the loader does

      std::vector<float> x(static_cast<size_t>(c.n_tokens * c.n_in));
      for (float& v : x) v = uniform(rng);
      std::vector<ActivationBlockQ8> qx;
      std::vector<float> x_seen = x;  // what the kernel consumes (8-bit blocks for quantized types)
      if (uses_q8_activations(c.dtype)) {
        qx.resize(static_cast<size_t>(c.n_tokens * c.n_in / 32));
        for (int64_t t = 0; t < c.n_tokens; ++t)
          quantize_activations_q8(x.data() + t * c.n_in, c.n_in, qx.data() + t * (c.n_in / 32));
        for (int64_t i = 0; i < c.n_tokens * c.n_in; ++i) x_seen[i] = qx[i / 32].scale * qx[i / 32].quants[i % 32];
      }
      std::vector<float> expected(static_cast<size_t>(c.n_tokens * c.n_out));
      ref::matmul(w, x_seen.data(), c.n_tokens, expected.data());

      std::vector<float> all(expected.size());
      run_gemm(table, w, 0, c.n_out, x, qx, c.n_tokens, all);
      for (size_t i = 0; i < all.size(); ++i) EXPECT_NEAR(all[i], expected[i], 1e-4 * (1.0 + std::fabs(expected[i])));

      // Each (row, token) alone: a one-row range and a one-token batch.
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        std::vector<float> x_one(x.begin() + t * c.n_in, x.begin() + (t + 1) * c.n_in);
        std::vector<ActivationBlockQ8> qx_one;
        if (!qx.empty()) qx_one.assign(qx.begin() + t * (c.n_in / 32), qx.begin() + (t + 1) * (c.n_in / 32));
        for (int64_t r = 0; r < c.n_out; ++r) {
          std::vector<float> one(static_cast<size_t>(c.n_out), 0.0f);
          run_gemm(table, w, r, r + 1, x_one, qx_one, 1, one);
          EXPECT_EQ(std::bit_cast<uint32_t>(one[r]), std::bit_cast<uint32_t>(all[t * c.n_out + r]))
              << "row " << r << " token " << t;
        }
      }
    }
  }
}

// The levels that share a layout compute the same integers and take the same float steps
// per lane, so their results agree bit for bit (bench/RESULTS.md lists what differs).
TEST(KernelTable, SharedLayoutsGiveTheSameBitsAcrossLevels) {
  struct Family {
    DType dtype;
    std::vector<Isa> levels;
  };
  const std::vector<Family> families = {
      {DType::Q8_0, {Isa::Avx2, Isa::Avx512, Isa::Amx}},
      {DType::Q4_0, {Isa::Avx2, Isa::Avx512, Isa::Amx}},
      {DType::F16, {Isa::Avx512, Isa::Amx}},
      {DType::BF16, {Isa::Avx512, Isa::Amx}},
      {DType::F32, {Isa::Avx512, Isa::Amx}},
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  int compared = 0;
  for (const Family& family : families) {
    std::vector<Isa> levels;
    for (Isa isa : family.levels)
      if (static_cast<int>(isa) <= static_cast<int>(detect_isa())) levels.push_back(isa);
    if (levels.size() < 2) {
      std::printf("%s: fewer than two of its levels on this CPU, not compared\n",
                  std::string(dtype_name(family.dtype)).c_str());
      continue;
    }
    for (const auto& [n_out, n_in, n_tokens] :
         {std::tuple<int64_t, int64_t, int64_t>{37, 96, 1}, {40, 256, 5}, {17, 64, 35}}) {
      std::vector<float> weights(static_cast<size_t>(n_out * n_in));
      for (float& v : weights) v = uniform(rng);
      const int64_t row_bytes = dtype_row_bytes(family.dtype, n_in);
      std::vector<uint8_t> stored(static_cast<size_t>(n_out * row_bytes));
      for (int64_t r = 0; r < n_out; ++r)
        quantize_row(family.dtype, weights.data() + r * n_in, stored.data() + r * row_bytes, n_in);
      std::vector<float> x(static_cast<size_t>(n_tokens * n_in));
      for (float& v : x) v = uniform(rng);
      std::vector<ActivationBlockQ8> qx;
      if (uses_q8_activations(family.dtype)) {
        qx.resize(static_cast<size_t>(n_tokens * n_in / 32));
        for (int64_t t = 0; t < n_tokens; ++t)
          quantize_activations_q8(x.data() + t * n_in, n_in, qx.data() + t * (n_in / 32));
      }
      std::vector<float> first;
      for (Isa isa : levels) {
        const KernelTable& table = kernel_table(isa);
        TensorView w = make_view(stored.data(), family.dtype, {n_out, n_in});
        const std::vector<uint8_t> packed = pack_for_level(table, w);
        ASSERT_FALSE(packed.empty()) << isa_name(isa) << " does not pack " << dtype_name(family.dtype);
        std::vector<float> out(static_cast<size_t>(n_tokens * n_out));
        run_gemm(table, w, 0, n_out, x, qx, n_tokens, out);
        if (first.empty()) {
          first = out;
          continue;
        }
        for (size_t i = 0; i < out.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(first[i]))
              << dtype_name(family.dtype) << " " << isa_name(isa) << " vs " << isa_name(levels[0]) << " at " << i
              << " (" << n_out << "x" << n_in << ", " << n_tokens << " tokens)";
        ++compared;
      }
    }
  }
  if (compared == 0) GTEST_SKIP() << "this CPU has at most one SIMD level of each family: nothing to compare";
}

}  // namespace
}  // namespace tandem
