// The CUDA kernels' per-element dequantisation (backends/cuda/block_dequant.h) is host code
// too: here it is held against the reference row conversion (base/quant.h dequantize_row),
// bit for bit, for every element of random rows of each type the device takes. This runs on
// any machine; the device kernels then only add how rows are walked (cuda_kernels_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/block_dequant.h"
#include "base/half.h"
#include "base/quant.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

template <DType type>
void expect_matches_reference(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  // A wide spread, so the k-quant sub-block scales and mins differ from each other.
  std::vector<float> x = random_floats(rng, n, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; i += 37) x[static_cast<size_t>(i)] *= 9.0f;
  std::vector<uint8_t> row(static_cast<size_t>(dtype_row_bytes(type, n)));
  quantize_row(type, x.data(), row.data(), n);
  std::vector<float> expected(static_cast<size_t>(n));
  dequantize_row(type, row.data(), expected.data(), n);
  int mismatches = 0;
  for (int64_t k = 0; k < n && mismatches < 5; ++k) {
    const float got = cuda::dequant_element<type>(row.data(), k);
    if (bits_of(got) != bits_of(expected[static_cast<size_t>(k)])) {
      ++mismatches;
      ADD_FAILURE() << dtype_name(type) << " element " << k << ": " << got << " vs reference "
                    << expected[static_cast<size_t>(k)];
    }
  }
}

// The GEMV's eight-at-a-time form (dequant_group) gives the same bits as the reference.
// The row sits at a 16-byte aligned address, as device rows do.
template <DType type>
void expect_groups_match_reference(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x = random_floats(rng, n, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; i += 37) x[static_cast<size_t>(i)] *= 9.0f;
  std::vector<cuda::Words4> storage(static_cast<size_t>(dtype_row_bytes(type, n) / 16 + 1));
  auto* row = reinterpret_cast<uint8_t*>(storage.data());
  quantize_row(type, x.data(), row, n);
  std::vector<float> expected(static_cast<size_t>(n));
  dequantize_row(type, row, expected.data(), n);
  for (int64_t c = 0; c < n; c += 8) {
    float w[8];
    cuda::dequant_group<type>(row, c, w);
    for (int j = 0; j < 8; ++j)
      ASSERT_EQ(bits_of(w[j]), bits_of(expected[static_cast<size_t>(c + j)]))
          << dtype_name(type) << " element " << c + j << ": " << w[j] << " vs " << expected[static_cast<size_t>(c + j)];
  }
}

TEST(CudaBlockDequant, GroupsOfEightMatchTheReferenceBitForBit) {
  expect_groups_match_reference<DType::F16>(96, 12);
  expect_groups_match_reference<DType::BF16>(96, 13);
  expect_groups_match_reference<DType::Q8_0>(32 * 7, 14);
  expect_groups_match_reference<DType::Q4_0>(32 * 7, 15);
  expect_groups_match_reference<DType::Q4_K>(256 * 3, 16);
  expect_groups_match_reference<DType::Q6_K>(256 * 3, 17);
}

// The split layout (quants apart from scales) gives the same bits, every row of a matrix.
template <DType type>
void expect_split_matches_reference(int64_t n_rows, int64_t n_cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t row_bytes = dtype_row_bytes(type, n_cols);
  std::vector<uint8_t> rows(static_cast<size_t>(n_rows * row_bytes));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> x = random_floats(rng, n_cols, -2.0f, 2.0f);
    quantize_row(type, x.data(), rows.data() + r * row_bytes, n_cols);
  }
  int64_t scales_offset = 0;
  const std::vector<uint8_t> split = cuda::split_block_rows(type, rows.data(), n_rows, n_cols, &scales_offset);
  ASSERT_EQ(scales_offset % 16, 0);
  std::vector<cuda::Words4> storage(split.size() / 16 + 1);  // 16-byte aligned, as on the device
  auto* device_like = reinterpret_cast<uint8_t*>(storage.data());
  std::memcpy(device_like, split.data(), split.size());
  const auto* scales = reinterpret_cast<const uint16_t*>(device_like + scales_offset);
  std::vector<float> expected(static_cast<size_t>(n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(type, rows.data() + r * row_bytes, expected.data(), n_cols);
    for (int64_t c = 0; c < n_cols; c += 8) {
      float w[8];
      cuda::dequant_group_split<type>(device_like + r * cuda::cuda_split_quant_row_bytes(type, n_cols),
                                      scales + r * (n_cols / 32), c, w);
      for (int j = 0; j < 8; ++j)
        ASSERT_EQ(bits_of(w[j]), bits_of(expected[static_cast<size_t>(c + j)]))
            << dtype_name(type) << " row " << r << " element " << c + j;
    }
  }
}

TEST(CudaBlockDequant, SplitLayoutMatchesTheReferenceBitForBit) {
  expect_split_matches_reference<DType::Q8_0>(5, 32 * 7, 18);
  expect_split_matches_reference<DType::Q4_0>(5, 32 * 7, 19);
}

TEST(CudaBlockDequant, EveryTypeMatchesTheReferenceBitForBit) {
  expect_matches_reference<DType::F32>(96, 1);
  expect_matches_reference<DType::F16>(96, 2);
  expect_matches_reference<DType::BF16>(96, 3);
  expect_matches_reference<DType::Q8_0>(32 * 7, 4);
  expect_matches_reference<DType::Q4_0>(32 * 7, 5);
  expect_matches_reference<DType::Q4_K>(256 * 3, 6);
  expect_matches_reference<DType::Q6_K>(256 * 3, 7);
}

// Sub-block scales 4..7 of Q4_K take their top bits from other bytes: a row whose scales are
// all large exercises them (random rows mostly have small ones).
TEST(CudaBlockDequant, Q4KHighScaleBitsMatch) {
  std::vector<float> x(512);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 257) * ((i / 32) % 2 ? 1.0f : -0.01f);
  std::vector<uint8_t> row(static_cast<size_t>(dtype_row_bytes(DType::Q4_K, 512)));
  quantize_row(DType::Q4_K, x.data(), row.data(), 512);
  std::vector<float> expected(512);
  dequantize_row(DType::Q4_K, row.data(), expected.data(), 512);
  for (int64_t k = 0; k < 512; ++k)
    ASSERT_EQ(bits_of(cuda::dequant_element<DType::Q4_K>(row.data(), k)), bits_of(expected[static_cast<size_t>(k)]))
        << "element " << k;
}

// Every half, including subnormals, infinities and NaNs, converts as base/half.h does.
TEST(CudaBlockDequant, EveryHalfConvertsExactly) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float expected = f16_to_f32(static_cast<uint16_t>(h));
    ASSERT_EQ(bits_of(cuda::f16_bits_to_float(static_cast<uint16_t>(h))), bits_of(expected))
        << "half 0x" << std::hex << h;
  }
}

}  // namespace
}  // namespace tandem
