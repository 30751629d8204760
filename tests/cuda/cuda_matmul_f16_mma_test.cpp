// The tensor-core F16 and Q8_0 matmul (backends/cuda/matmul_f16_mma.h) and its layout
// (f16_mma_layout.h). The layout test is host code and runs in every CUDA build: it holds the
// packing to the PTX ISA's fragment map for mma.m16n8k16 (positions written out here, not
// recomputed with the header's helpers) and checks that every element lands exactly once.
// The device tests (skipping without a device) compare the kernel with a double reference on
// F16-rounded activations over odd tile counts, the device's activation packing with the
// host's bit for bit, and a token's outputs alone, in a batch of one tile and of many.
#if defined(TANDEM_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/f16_mma_layout.h"
#include "backends/cuda/matmul_f16_mma.h"
#include "base/half.h"
#include "base/quant.h"
#include "cuda/cuda_test_device.h"
#include "support/float_ulps.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

// The PTX ISA's fragment map for mma.m16n8k16 with .f16 A (row-major): lane l, group g = l/4,
// t = l%4; a0,a1 = row g, columns 2t, 2t+1; a2,a3 = row g+8; a4..a7 as a0..a3 at columns +8.
TEST(F16MmaLayout, WeightTilesFollowThePtxFragmentMap) {
  const int64_t n_rows = 32, n_cols = 48;
  std::vector<uint16_t> rows(static_cast<size_t>(n_rows * n_cols));
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<uint16_t>(i);  // value = row * n_cols + col
  std::vector<uint16_t> tiles(rows.size(), 0xffff);
  cuda::pack_f16_mma_weights(rows.data(), n_rows, n_cols, tiles.data());
  const auto at = [&](int64_t row_tile, int64_t col_tile, int lane, int half) {
    return tiles[static_cast<size_t>(((row_tile * (n_cols / 16) + col_tile) * 32 + lane) * 8 + half)];
  };
  const auto value = [&](int64_t row, int64_t col) { return static_cast<uint16_t>(row * n_cols + col); };
  EXPECT_EQ(at(0, 0, 0, 0), value(0, 0));
  EXPECT_EQ(at(0, 0, 0, 1), value(0, 1));
  EXPECT_EQ(at(0, 0, 0, 2), value(8, 0));
  EXPECT_EQ(at(0, 0, 0, 4), value(0, 8));
  EXPECT_EQ(at(0, 0, 5, 1), value(1, 3));   // g = 1, t = 1: column 2t + 1
  EXPECT_EQ(at(0, 0, 6, 7), value(9, 13));  // g = 1, t = 2: a7 = row g + 8, column 2t + 9
  EXPECT_EQ(at(0, 0, 31, 7), value(15, 15));
  EXPECT_EQ(at(1, 2, 0, 0), value(16, 32));  // the second row tile's third column tile
  EXPECT_EQ(at(1, 2, 30, 3), value(16 + 15, 32 + 5));
  std::set<uint16_t> seen(tiles.begin(), tiles.end());
  EXPECT_EQ(seen.size(), rows.size()) << "an element packed twice or not at all";
  EXPECT_FALSE(seen.contains(0xffff));
  EXPECT_TRUE(cuda::fits_f16_mma(32, 48));
  EXPECT_FALSE(cuda::fits_f16_mma(33, 48));
  EXPECT_FALSE(cuda::fits_f16_mma(32, 40));
}

// Q8_0: per 16-row tile and 32-column block, lane l's bytes 0..7 are the A fragment's 8
// quants for the block's columns 0..15, bytes 8..15 for columns 16..31; the 16 rows' scales
// follow all the quants.
TEST(F16MmaLayout, Q8_0TilesHoldTheQuantsInFragmentOrderAndTheScalesAfter) {
  const int64_t n_rows = 16, n_cols = 64, row_bytes = 2 * 34;
  std::vector<uint8_t> rows(static_cast<size_t>(n_rows * row_bytes));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t b = 0; b < 2; ++b) {
      uint8_t* block = rows.data() + r * row_bytes + b * 34;
      block[0] = static_cast<uint8_t>(r), block[1] = static_cast<uint8_t>(0x40 + b);  // the scale's bytes
      for (int i = 0; i < 32; ++i) block[2 + i] = static_cast<uint8_t>((r * 64 + b * 32 + i) % 251);
    }
  std::vector<uint8_t> packed(rows.size(), 0xee);
  cuda::pack_q8_0_mma_weights(rows.data(), n_rows, n_cols, packed.data());
  const auto quant = [](int64_t row, int64_t col) { return static_cast<uint8_t>((row * 64 + col) % 251); };
  const auto at = [&](int64_t block, int lane, int byte) {
    return packed[static_cast<size_t>(block * 512 + lane * 16 + byte)];
  };
  EXPECT_EQ(at(0, 0, 0), quant(0, 0));
  EXPECT_EQ(at(0, 0, 2), quant(8, 0));
  EXPECT_EQ(at(0, 0, 8), quant(0, 16));
  EXPECT_EQ(at(0, 6, 7), quant(9, 13));                      // g = 1, t = 2, a7
  EXPECT_EQ(at(0, 6, 15), quant(9, 16 + 13));                // the same place in the second 16 columns
  EXPECT_EQ(at(1, 31, 12), quant(7 + 8 * 0, 32 + 16 + 14));  // byte 12: half 4 of the second 16: row g, col 2t + 8
  ASSERT_EQ(cuda::q8_0_mma_scale_offset(n_rows, n_cols), 2 * 512);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t r = 0; r < n_rows; ++r) {
      EXPECT_EQ(packed[static_cast<size_t>(1024 + (b * 16 + r) * 2)], r) << "block " << b << " row " << r;
      EXPECT_EQ(packed[static_cast<size_t>(1024 + (b * 16 + r) * 2 + 1)], 0x40 + b);
    }
  EXPECT_TRUE(cuda::fits_q8_0_mma(16, 64));
  EXPECT_FALSE(cuda::fits_q8_0_mma(16, 48));
}

// B (.f16, column-major 16x8): b0,b1 = columns (k) 2t, 2t+1 of token g; b2,b3 = k + 8.
std::vector<uint16_t> host_packed_activations(const std::vector<float>& x, int64_t n_tokens, int64_t n_cols) {
  std::vector<uint16_t> packed(static_cast<size_t>(cuda::f16_mma_activation_halves(n_tokens, n_cols)));
  const int64_t col_tiles = n_cols / 16;
  for (size_t lane_index = 0; lane_index < packed.size() / 4; ++lane_index) {
    const int lane = static_cast<int>(lane_index % 32);
    const int64_t tile = static_cast<int64_t>(lane_index / 32);
    const int64_t token = tile / col_tiles * 8 + lane / 4, col_tile = tile % col_tiles;
    for (int j = 0; j < 4; ++j) {
      const int64_t col = col_tile * 16 + 2 * (lane % 4) + j % 2 + 8 * (j / 2);
      const float v = token < n_tokens ? x[static_cast<size_t>(token * n_cols + col)] : 0.0f;
      packed[lane_index * 4 + static_cast<size_t>(j)] = f32_to_f16(v);
    }
  }
  return packed;
}

// A random F16 or Q8_0 matrix packed for the tensor cores, and its values for the reference.
struct DeviceMmaMatrix {
  DType type;
  cuda::DeviceBuffer<uint8_t> packed;
  std::vector<float> values;  // row-major, dequantised
  int64_t n_rows, n_cols;
};

DeviceMmaMatrix random_mma_matrix(DType type, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
  DeviceMmaMatrix m{type, {}, {}, n_rows, n_cols};
  const int64_t row_bytes = dtype_row_bytes(type, n_cols);
  std::vector<uint8_t> rows(static_cast<size_t>(n_rows * row_bytes)), packed(rows.size());
  m.values.resize(static_cast<size_t>(n_rows * n_cols));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> row = random_floats(rng, n_cols, -1.0f, 1.0f);
    quantize_row(type, row.data(), rows.data() + r * row_bytes, n_cols);
    dequantize_row(type, rows.data() + r * row_bytes, m.values.data() + r * n_cols, n_cols);
  }
  if (type == DType::F16)
    cuda::pack_f16_mma_weights(reinterpret_cast<const uint16_t*>(rows.data()), n_rows, n_cols,
                               reinterpret_cast<uint16_t*>(packed.data()));
  else
    cuda::pack_q8_0_mma_weights(rows.data(), n_rows, n_cols, packed.data());
  m.packed = cuda::DeviceBuffer<uint8_t>(packed);
  return m;
}

std::vector<float> device_product(const DeviceMmaMatrix& m, const std::vector<float>& x, int64_t n_tokens) {
  cuda::DeviceBuffer<float> x_device(x);
  cuda::DeviceBuffer<uint16_t> packed(cuda::f16_mma_activation_halves(n_tokens, m.n_cols));
  cuda::DeviceBuffer<float> out(n_tokens * m.n_rows);
  cuda::pack_activations_f16_mma(x_device.data(), n_tokens, m.n_cols, packed.data(), nullptr);
  if (m.type == DType::F16)
    cuda::matmul_f16_mma(reinterpret_cast<const uint16_t*>(m.packed.data()), m.n_rows, m.n_cols, packed.data(),
                         n_tokens, out.data(), nullptr);
  else
    cuda::matmul_q8_0_mma(m.packed.data(), m.n_rows, m.n_cols, packed.data(), n_tokens, out.data(), nullptr);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download();
}

TEST(CudaMatmulF16Mma, DevicePackingEqualsTheHostsBitForBit) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3);
  for (const auto& [n_tokens, n_cols] : {std::pair<int64_t, int64_t>{1, 16}, {13, 80}, {64, 2048}}) {
    std::vector<float> x = random_floats(rng, n_tokens * n_cols, -3.0f, 3.0f);
    x[0] = 65519.0f, x[1] = 1e-6f;  // rounding at the top of the range and a subnormal
    cuda::DeviceBuffer<float> x_device(x);
    cuda::DeviceBuffer<uint16_t> packed(cuda::f16_mma_activation_halves(n_tokens, n_cols));
    cuda::pack_activations_f16_mma(x_device.data(), n_tokens, n_cols, packed.data(), nullptr);
    TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(packed.download(), host_packed_activations(x, n_tokens, n_cols)) << n_tokens << "x" << n_cols;
  }
}

TEST(CudaMatmulF16Mma, FusedRmsnormPackEqualsRmsnormThenPack) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(41);
  const int64_t n_tokens = 13, n = 2048;
  const std::vector<float> x = random_floats(rng, n_tokens * n, -4.0f, 4.0f),
                           weight = random_floats(rng, n, 0.5f, 1.5f);
  cuda::DeviceBuffer<float> x_device(x), weight_device(weight), normed(n_tokens * n);
  cuda::DeviceBuffer<uint16_t> fused(cuda::f16_mma_activation_halves(n_tokens, n)),
      separate(cuda::f16_mma_activation_halves(n_tokens, n));
  cuda::rmsnorm(x_device.data(), weight_device.data(), n_tokens, n, 1e-5f, normed.data(), nullptr);
  cuda::pack_activations_f16_mma(normed.data(), n_tokens, n, separate.data(), nullptr);
  cuda::rmsnorm_pack_f16_mma(x_device.data(), weight_device.data(), n_tokens, n, 1e-5f, fused.data(), nullptr);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<uint16_t> a = fused.download(), b = separate.download();
  for (size_t i = 0; i < a.size(); ++i) {
    if (static_cast<int64_t>(i / 4 / 32 / (n / 16) * 8 + i / 4 % 32 / 4) >= n_tokens) continue;  // padding
    ASSERT_EQ(a[i], b[i]) << "packed half " << i;
  }
}

class CudaMatmulMma : public ::testing::TestWithParam<DType> {};

TEST_P(CudaMatmulMma, MatchesADoubleReferenceOnF16Activations) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const DType type = GetParam();
  std::mt19937 rng(11);
  // Steps fewer than the 8 ranges (32), not a multiple of 8 (13 tiles; 11 blocks), one token
  // tile, several, and a partial group of eight.
  for (const auto& [n_rows, n_cols, n_tokens] : {std::tuple<int64_t, int64_t, int64_t>{16, 32, 1},
                                                 {48, type == DType::F16 ? 208 : 352, 9},
                                                 {64, 512, 70},
                                                 {32, 2048, 3},
                                                 {16, 64, 130},
                                                 {80, 5632, 17}}) {
    const DeviceMmaMatrix m = random_mma_matrix(type, n_rows, n_cols, rng);
    const std::vector<float> x = random_floats(rng, n_tokens * n_cols, -1.0f, 1.0f);
    const std::vector<float> got = device_product(m, x, n_tokens);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = 0; r < n_rows; ++r) {
        double expected = 0.0;
        for (int64_t c = 0; c < n_cols; ++c)
          expected += static_cast<double>(m.values[static_cast<size_t>(r * n_cols + c)]) *
                      f16_to_f32(f32_to_f16(x[static_cast<size_t>(t * n_cols + c)]));
        // f32 accumulation of n_cols exact products: a few float epsilons per term at most.
        ASSERT_NEAR(got[static_cast<size_t>(t * n_rows + r)], expected, 1e-6 * static_cast<double>(n_cols))
            << dtype_name(type) << " " << n_rows << "x" << n_cols << " token " << t << " row " << r;
      }
  }
}

TEST_P(CudaMatmulMma, ATokensOutputDoesNotDependOnTheBatch) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const DType type = GetParam();
  std::mt19937 rng(23);
  // 66 tiles, 33 blocks; 9 token tiles: two groups. 48 rows: blocks of one row tile; 64: of
  // two in a batch, of one alone.
  for (const int64_t n_rows : {int64_t{48}, int64_t{64}}) {
    const int64_t n_cols = 1056, n_tokens = 70;
    const DeviceMmaMatrix m = random_mma_matrix(type, n_rows, n_cols, rng);
    const std::vector<float> x = random_floats(rng, n_tokens * n_cols, -1.0f, 1.0f);
    const std::vector<float> batched = device_product(m, x, n_tokens);
    const std::vector<float> head(x.begin(), x.begin() + 9 * n_cols);  // 9 tokens: two tiles, one group
    const std::vector<float> few = device_product(m, head, 9);
    for (const int64_t t : {int64_t{0}, int64_t{5}, int64_t{8}, int64_t{37}, int64_t{69}}) {
      const std::vector<float> alone(x.begin() + t * n_cols, x.begin() + (t + 1) * n_cols);
      const std::vector<float> single = device_product(m, alone, 1);
      for (int64_t r = 0; r < n_rows; ++r) {
        const float in_batch = batched[static_cast<size_t>(t * n_rows + r)];
        ASSERT_TRUE(same_bits(single[static_cast<size_t>(r)], in_batch))
            << n_rows << " rows: token " << t << " row " << r;
        if (t < 9) {
          ASSERT_TRUE(same_bits(few[static_cast<size_t>(t * n_rows + r)], in_batch)) << "token " << t;
        }
      }
    }
  }
}

// The epilogues finish the same sums Store writes: Add onto a residual, SplitThree into three
// buffers, and SwiGluPacked's silu(gate) * up as the next matmul's packed f16 input.
TEST_P(CudaMatmulMma, EpiloguesFinishTheSameSums) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const DType type = GetParam();
  std::mt19937 rng(31);
  const int64_t n_rows = 64, n_cols = 256, n_tokens = 11;
  const DeviceMmaMatrix m = random_mma_matrix(type, n_rows, n_cols, rng);
  const std::vector<float> x = random_floats(rng, n_tokens * n_cols, -1.0f, 1.0f);
  const std::vector<float> stored = device_product(m, x, n_tokens);
  cuda::DeviceBuffer<float> x_device(x);
  cuda::DeviceBuffer<uint16_t> packed_x(cuda::f16_mma_activation_halves(n_tokens, n_cols));
  cuda::pack_activations_f16_mma(x_device.data(), n_tokens, n_cols, packed_x.data(), nullptr);

  const std::vector<float> residual = random_floats(rng, n_tokens * n_rows, -2.0f, 2.0f);
  cuda::DeviceBuffer<float> sum(residual);
  cuda::matmul_mma(type, m.packed.data(), n_rows, n_cols, packed_x.data(), n_tokens,
                   {.mode = cuda::MmaOutput::Add, .out = sum.data()}, nullptr);
  cuda::DeviceBuffer<float> first(n_tokens * 16), second(n_tokens * 8), third(n_tokens * 40);
  cuda::matmul_mma(type, m.packed.data(), n_rows, n_cols, packed_x.data(), n_tokens,
                   {.mode = cuda::MmaOutput::SplitThree,
                    .out = first.data(),
                    .second = second.data(),
                    .third = third.data(),
                    .first_rows = 16,
                    .second_rows = 8},
                   nullptr);
  // The matrix's rows read as interleaved gate/up: column j's gate is row 16(j/8) + j%8, its up 8 further.
  cuda::DeviceBuffer<uint16_t> product(cuda::f16_mma_activation_halves(n_tokens, n_rows / 2));
  cuda::matmul_mma(type, m.packed.data(), n_rows, n_cols, packed_x.data(), n_tokens,
                   {.mode = cuda::MmaOutput::SwiGluPacked, .packed = product.data()}, nullptr);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> added = sum.download(), a = first.download(), b = second.download(), c = third.download();
  const std::vector<uint16_t> swiglu = product.download();
  std::vector<float> expected_product(static_cast<size_t>(n_tokens * n_rows / 2));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < n_rows; ++r) {
      const size_t i = static_cast<size_t>(t * n_rows + r);
      ASSERT_TRUE(same_bits(added[i], residual[i] + stored[i])) << "Add: token " << t << " row " << r;
      const float split =
          r < 16 ? a[static_cast<size_t>(t * 16 + r)]
                 : (r < 24 ? b[static_cast<size_t>(t * 8 + r - 16)] : c[static_cast<size_t>(t * 40 + r - 24)]);
      ASSERT_TRUE(same_bits(split, stored[i])) << "SplitThree: token " << t << " row " << r;
    }
    for (int64_t j = 0; j < n_rows / 2; ++j) {
      const float gate = stored[static_cast<size_t>(t * n_rows + j / 8 * 16 + j % 8)];
      const float up = stored[static_cast<size_t>(t * n_rows + j / 8 * 16 + j % 8 + 8)];
      expected_product[static_cast<size_t>(t * n_rows / 2 + j)] = gate / (1.0f + std::exp(-gate)) * up;
    }
  }
  // Compared through the host's packing of the expected product (expf may differ by an ulp).
  const std::vector<uint16_t> expected = host_packed_activations(expected_product, n_tokens, n_rows / 2);
  ASSERT_EQ(swiglu.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const size_t lane_index = i / 4;
    if (static_cast<int64_t>(lane_index / 32 / ((n_rows / 2) / 16) * 8 + lane_index % 32 / 4) >= n_tokens) continue;
    ASSERT_NEAR(f16_to_f32(swiglu[i]), f16_to_f32(expected[i]),
                2e-3 * std::max(1.0f, std::fabs(f16_to_f32(expected[i]))))
        << "SwiGluPacked: packed half " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, CudaMatmulMma, ::testing::Values(DType::F16, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace tandem
#endif
