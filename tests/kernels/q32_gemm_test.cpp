// The GEMMs of Q5_0, Q5_1, IQ4_NL and MXFP4 weights at every level (kernel_table(isa).gemm_q8:
// the portable row dots; from AVX2 up the weights packed at load as the loader does —
// packed/q8_layout.h — AVX2 maddubs, AVX-512 dpbusd, AMX = AVX-512; and the row-major
// kernels the SIMD levels keep for weights they cannot pack) against a float64 reference on
// the dequantized weights and activation blocks, on blocks of random bytes (every code, qh
// pattern and exponent, not only what the quantizers write) and on extreme blocks (largest
// levels against +-127 activations: where 16-bit pair sums could saturate); odd row counts,
// 1..9 tokens, rows that are not whole 256-element blocks; batch invariance: each (row, token)
// result the same bits computed in any row range or token count; and the packed kernels of
// AVX2 and AVX-512 the same bits (one float step per block, in the same order).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "base/quant.h"
#include "kernels/kernel_table.h"
#include "support/cpu_levels.h"

namespace tandem {
namespace {

constexpr DType kTypes[] = {DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::MXFP4};

// A normal f16 scale of either sign, magnitude in [2^-8, 2).
uint16_t random_scale(std::mt19937& rng) {
  std::uniform_real_distribution<float> magnitude(-8.0f, 1.0f);
  return f32_to_f16((rng() & 1 ? -1.0f : 1.0f) * std::exp2(magnitude(rng)));
}

// Random bytes in every block, with the scale fields set to sane values (random bytes there
// would give infinities and NaNs): f16 scales as above, MXFP4 exponents 2^-8 .. 2^8.
std::vector<uint8_t> random_weights(std::mt19937& rng, DType type, int64_t n_rows, int64_t n_in) {
  const int64_t block_bytes = dtype_block_geometry(type).second, n_blocks = n_rows * n_in / 32;
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * block_bytes));
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(rng());
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = bytes.data() + b * block_bytes;
    if (type == DType::MXFP4) {
      block[0] = static_cast<uint8_t>(127 - 8 + rng() % 17);
      continue;
    }
    const uint16_t d = random_scale(rng);
    std::memcpy(block, &d, 2);
    if (type == DType::Q5_1) {
      const uint16_t m = random_scale(rng);
      std::memcpy(block + 2, &m, 2);
    }
  }
  return bytes;
}

// Every block at the format's largest-magnitude code (Q5_0 code 0 = -16, Q5_1 code 31, IQ4_NL
// level -127, MXFP4 -12), scale 1.
std::vector<uint8_t> extreme_weights(DType type, int64_t n_rows, int64_t n_in) {
  const int64_t block_bytes = dtype_block_geometry(type).second, n_blocks = n_rows * n_in / 32;
  std::vector<uint8_t> bytes(static_cast<size_t>(n_blocks * block_bytes), 0);
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = bytes.data() + b * block_bytes;
    switch (type) {
      case DType::Q5_0: block[0] = 0x00, block[1] = 0x3c; break;  // codes 0: nibbles and qh zero
      case DType::Q5_1:
        block[0] = 0x00, block[1] = 0x3c;
        std::memset(block + 4, 0xff, 20);  // codes 31; m = 0
        break;
      case DType::IQ4_NL: block[0] = 0x00, block[1] = 0x3c; break;  // nibble 0: -127
      default: block[0] = 128; std::memset(block + 1, 0xff, 16);    // nibble 15: -12 (x 2^0)
    }
  }
  return bytes;
}

// Activation blocks of random int8 in [-127, 127] (or all +-127 when `extreme`) and scales.
std::vector<ActivationBlockQ8> random_activations(std::mt19937& rng, int64_t n_blocks, bool extreme) {
  std::vector<ActivationBlockQ8> blocks(static_cast<size_t>(n_blocks));
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  for (ActivationBlockQ8& block : blocks) {
    block.scale = scale(rng);
    for (int8_t& q : block.quants)
      q = static_cast<int8_t>(extreme ? (rng() & 1 ? 127 : -127) : static_cast<int>(rng() % 255) - 127);
  }
  return blocks;
}

struct Reference {
  std::vector<double> values;     // [n_tokens, n_rows]
  std::vector<double> magnitude;  // sum |w x| per element: the float rounding scales with it
};

Reference reference_gemm(const TensorView& w, const std::vector<ActivationBlockQ8>& x, int64_t n_tokens) {
  const int64_t n_rows = w.n_rows(), n_in = w.row_length();
  Reference ref{std::vector<double>(static_cast<size_t>(n_tokens * n_rows)),
                std::vector<double>(static_cast<size_t>(n_tokens * n_rows))};
  std::vector<float> row(static_cast<size_t>(n_in)), min(static_cast<size_t>(n_in), 0.0f);
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(w.dtype, w.row(r), row.data(), n_in);
    // Q5_1 sums d q x and m x apart: the terms, not their sum w x, set the rounding.
    if (w.dtype == DType::Q5_1)
      for (int64_t c = 0; c < n_in; ++c) {
        uint16_t m;
        std::memcpy(&m, w.row(r) + c / 32 * 24 + 2, 2);
        min[c] = f16_to_f32(m);
      }
    for (int64_t t = 0; t < n_tokens; ++t) {
      double sum = 0.0, magnitude = 0.0;
      for (int64_t c = 0; c < n_in; ++c) {
        const ActivationBlockQ8& block = x[static_cast<size_t>(t * (n_in / 32) + c / 32)];
        const double activation = static_cast<double>(block.scale) * block.quants[c % 32];
        sum += row[c] * activation;
        magnitude += (std::fabs(row[c] - min[c]) + std::fabs(min[c])) * std::fabs(activation);
      }
      ref.values[static_cast<size_t>(t * n_rows + r)] = sum;
      ref.magnitude[static_cast<size_t>(t * n_rows + r)] = magnitude;
    }
  }
  return ref;
}

// One level's gemm on `w` for 1..9 tokens: every element near the reference; each row alone
// and each token alone the same bits as in the whole call; nothing written outside the rows.
void check_level(Isa isa, const TensorView& w, std::mt19937& rng, bool extreme, const std::string& what) {
  const KernelTable& table = kernel_table(isa);
  const int64_t n_rows = w.n_rows(), n_blocks = w.row_length() / 32;
  for (int64_t n_tokens = 1; n_tokens <= 9; ++n_tokens) {
    const std::vector<ActivationBlockQ8> x = random_activations(rng, n_tokens * n_blocks, extreme);
    const Reference ref = reference_gemm(w, x, n_tokens);
    std::vector<float> all(static_cast<size_t>(n_tokens * n_rows));
    table.gemm_q8(w, 0, n_rows, x.data(), n_tokens, all.data(), n_rows);
    const std::string where = what + " " + std::string(isa_name(isa)) + " " + std::to_string(n_rows) + "x" +
                              std::to_string(w.row_length()) + " tokens " + std::to_string(n_tokens);
    for (size_t i = 0; i < all.size(); ++i)
      ASSERT_NEAR(all[i], ref.values[i], 1e-5 * ref.magnitude[i] + 1e-30) << where << " element " << i;

    for (int64_t t = 0; t < n_tokens; ++t) {  // token t alone, all rows
      std::vector<float> one(static_cast<size_t>(n_rows));
      table.gemm_q8(w, 0, n_rows, x.data() + t * n_blocks, 1, one.data(), n_rows);
      ASSERT_EQ(std::memcmp(one.data(), all.data() + t * n_rows, one.size() * sizeof(float)), 0)
          << where << ": token " << t << " alone differs";
    }
    const int64_t begin = n_rows / 3, end = n_rows - n_rows / 4;  // a range cutting the row tiles
    std::vector<float> part(all.size(), -7.0f);
    table.gemm_q8(w, begin, end, x.data(), n_tokens, part.data(), n_rows);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = 0; r < n_rows; ++r) {
        const size_t i = static_cast<size_t>(t * n_rows + r);
        if (r < begin || r >= end)
          ASSERT_EQ(part[i], -7.0f) << where << ": wrote outside rows [" << begin << ", " << end << ")";
        else
          ASSERT_EQ(std::memcmp(&part[i], &all[i], sizeof(float)), 0)
              << where << ": row " << r << " token " << t << " differs in rows [" << begin << ", " << end << ")";
      }
  }
}

TEST(Q32Gemm, EveryLevelMatchesReferenceAndIsBatchInvariant) {
  std::mt19937 rng(13);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 32}, {5, 96}, {4, 64}, {17, 288}, {9, 800}, {33, 160}};
  for (Isa isa : supported_levels())
    for (DType type : kTypes)
      for (const auto& [n_rows, n_in] : shapes) {
        const std::vector<uint8_t> bytes = random_weights(rng, type, n_rows, n_in);
        TensorView w = make_view(bytes.data(), type, {n_rows, n_in});
        check_level(isa, w, rng, false, std::string(dtype_name(type)) + " file blocks");
        const std::vector<uint8_t> packed = pack_for_level(kernel_table(isa), w);  // as the loader does
        ASSERT_EQ(packed.empty(), isa == Isa::Scalar) << dtype_name(type) << " packed at " << isa_name(isa);
        if (!packed.empty()) check_level(isa, w, rng, false, std::string(dtype_name(type)) + " packed");
      }
}

TEST(Q32Gemm, PackedLevelsGiveTheSameBits) {
  std::mt19937 rng(23);
  std::vector<Isa> levels;
  for (Isa isa : supported_levels())
    if (isa != Isa::Scalar) levels.push_back(isa);
  if (levels.size() < 2) GTEST_SKIP() << "this CPU has fewer than two SIMD levels";
  const int64_t n_rows = 37, n_in = 224;
  for (DType type : kTypes) {
    const std::vector<uint8_t> bytes = random_weights(rng, type, n_rows, n_in);
    for (int64_t n_tokens : {1, 5, 11}) {
      const std::vector<ActivationBlockQ8> x = random_activations(rng, n_tokens * n_in / 32, false);
      std::vector<std::vector<float>> outs;
      for (Isa isa : levels) {
        TensorView w = make_view(bytes.data(), type, {n_rows, n_in});
        const std::vector<uint8_t> packed = pack_for_level(kernel_table(isa), w);
        ASSERT_FALSE(packed.empty());
        outs.emplace_back(static_cast<size_t>(n_tokens * n_rows));
        kernel_table(isa).gemm_q8(w, 0, n_rows, x.data(), n_tokens, outs.back().data(), n_rows);
      }
      for (size_t l = 1; l < levels.size(); ++l)
        ASSERT_EQ(std::memcmp(outs[l].data(), outs[0].data(), outs[0].size() * sizeof(float)), 0)
            << dtype_name(type) << " " << n_tokens << " tokens: " << isa_name(levels[l]) << " differs from "
            << isa_name(levels[0]);
    }
  }
}

TEST(Q32Gemm, ExtremeCodesAndActivationsDoNotSaturate) {
  std::mt19937 rng(17);
  for (Isa isa : supported_levels())
    for (DType type : kTypes)
      for (const auto& [n_rows, n_in] : std::vector<std::pair<int64_t, int64_t>>{{3, 96}, {6, 256}}) {
        const std::vector<uint8_t> bytes = extreme_weights(type, n_rows, n_in);
        TensorView w = make_view(bytes.data(), type, {n_rows, n_in});
        check_level(isa, w, rng, true, std::string(dtype_name(type)) + " extreme");
        const std::vector<uint8_t> packed = pack_for_level(kernel_table(isa), w);
        if (!packed.empty()) check_level(isa, w, rng, true, std::string(dtype_name(type)) + " extreme packed");
      }
}

// The quantizers' blocks through the model's path (matmul quantizes the activations itself),
// against the reference on the same activation blocks.
TEST(Q32Gemm, QuantizedWeightsThroughEveryLevel) {
  std::mt19937 rng(19);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n_rows = 21, n_in = 352;
  for (DType type : kTypes) {
    std::vector<float> values(static_cast<size_t>(n_rows * n_in));
    for (float& v : values) v = normal(rng);
    const int64_t row_bytes = dtype_row_bytes(type, n_in);
    std::vector<uint8_t> bytes(static_cast<size_t>(n_rows * row_bytes));
    for (int64_t r = 0; r < n_rows; ++r)
      quantize_row(type, values.data() + r * n_in, bytes.data() + r * row_bytes, n_in);
    for (Isa isa : supported_levels()) {
      TensorView w = make_view(bytes.data(), type, {n_rows, n_in});
      const std::vector<uint8_t> packed = pack_for_level(kernel_table(isa), w);
      check_level(isa, w, rng, false, std::string(dtype_name(type)) + " quantized");
    }
  }
}

}  // namespace
}  // namespace tandem
