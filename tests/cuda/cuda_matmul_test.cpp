// The device matmul (backends/cuda/matmul.h) against the scalar reference (ref::matmul, which
// dequantises with base/quant.h), every weight type on odd shapes, and its batch invariance:
// a token's output row is the same bits whatever else is in the batch. Skips without a device.
#if defined(TANDEM_WITH_CUDA)
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/block_dequant.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/matmul.h"
#include "base/quant.h"
#include "cuda/cuda_test_device.h"
#include "kernels/ref/reference_kernels.h"
#include "support/float_ulps.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

struct HostMatrix {
  std::vector<uint8_t> bytes;
  TensorView view;
};

HostMatrix random_matrix(DType type, int64_t n_rows, int64_t n_cols, std::mt19937& rng) {
  HostMatrix m;
  const int64_t row_bytes = dtype_row_bytes(type, n_cols);
  m.bytes.resize(static_cast<size_t>(n_rows * row_bytes));
  for (int64_t r = 0; r < n_rows; ++r) {
    const std::vector<float> row = random_floats(rng, n_cols, -1.0f, 1.0f);
    quantize_row(type, row.data(), m.bytes.data() + r * row_bytes, n_cols);
  }
  m.view.data = m.bytes.data();
  m.view.dtype = type;
  m.view.n_dims = 2;
  m.view.shape = {n_rows, n_cols, 0, 0};
  return m;
}

// split: Q8_0/Q4_0 in the split layout CudaForward uploads them in (quants apart from scales).
std::vector<float> device_matmul(const HostMatrix& m, const std::vector<float>& x, int64_t n_tokens,
                                 bool split = false) {
  const DType type = m.view.dtype;
  int64_t scales_offset = 0;
  cuda::DeviceBuffer<uint8_t> weight(
      split ? cuda::split_block_rows(type, m.bytes.data(), m.view.n_rows(), m.view.row_length(), &scales_offset)
            : m.bytes);
  cuda::DeviceBuffer<float> x_device(x);
  cuda::DeviceBuffer<float> out(n_tokens * m.view.n_rows());
  cuda::DeviceMatrix matrix{weight.data(), type, m.view.n_rows(), m.view.row_length(), m.view.row_bytes()};
  if (split) {
    matrix.row_bytes = cuda::cuda_split_quant_row_bytes(type, m.view.row_length());
    matrix.scales = reinterpret_cast<const uint16_t*>(weight.data() + scales_offset);
  }
  cuda::matmul(matrix, x_device.data(), n_tokens, out.data(), nullptr);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download();
}

class CudaMatmul : public ::testing::TestWithParam<DType> {};

TEST_P(CudaMatmul, MatchesTheReferenceOnOddShapes) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const DType type = GetParam();
  const int64_t block = type == DType::Q4_K || type == DType::Q6_K ? 256 : 32;
  // 100 columns (not whole groups of 8): F16/BF16 rows take the element-wise kernel; every
  // other shape takes the 8-column group kernel (F16/BF16, the block types; F32 never does).
  const bool blocks = type != DType::F32 && type != DType::F16 && type != DType::BF16;
  std::mt19937 rng(17);
  for (const auto& [n_rows, n_cols, n_tokens] : {std::tuple<int64_t, int64_t, int64_t>{37, block * 3, 1},
                                                 {129, block * 5, 37},
                                                 {5, block * 9, 8},
                                                 {19, blocks ? block * 2 : 100, 1},
                                                 {19, blocks ? block * 2 : 100, 20},
                                                 {4100, block * 2, 1},  // past 4096 rows: blocks of four warps, not one
                                                 {23, 512, 1},
                                                 {23, 1024, 11}}) {
    const HostMatrix m = random_matrix(type, n_rows, n_cols, rng);
    const std::vector<float> x = random_floats(rng, n_tokens * n_cols, -1.0f, 1.0f);
    std::vector<float> expected(static_cast<size_t>(n_tokens * n_rows));
    ref::matmul(m.view, x.data(), n_tokens, expected.data());
    // f32 sums of n_cols products in another order than the double reference: bounded by a
    // few float epsilons of the sum of magnitudes (about 1 for these inputs, times n_cols).
    const double tolerance = 4.0 * static_cast<double>(n_cols) * 1.2e-7;
    for (const bool split : {false, true}) {
      if (split && !cuda::cuda_split_layout(type)) continue;
      const std::vector<float> got = device_matmul(m, x, n_tokens, split);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], expected[i], tolerance) << dtype_name(type) << (split ? " split " : " ") << n_rows << "x"
                                                    << n_cols << " tokens " << n_tokens << " element " << i;
    }
  }
}

TEST_P(CudaMatmul, ARowsOutputDoesNotDependOnTheBatch) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const DType type = GetParam();
  std::mt19937 rng(29);
  // A tile of 16 tokens and one of 5; 1024 columns take F16/BF16's 16-byte-load kernel.
  const int64_t n_rows = 67, n_cols = 1024, n_tokens = 21;
  const HostMatrix m = random_matrix(type, n_rows, n_cols, rng);
  const std::vector<float> x = random_floats(rng, n_tokens * n_cols, -1.0f, 1.0f);
  for (const bool split : {false, true}) {
    if (split && !cuda::cuda_split_layout(type)) continue;
    const std::vector<float> batched = device_matmul(m, x, n_tokens, split);
    for (const int64_t t : {int64_t{0}, int64_t{9}, int64_t{20}}) {
      const std::vector<float> alone(x.begin() + t * n_cols, x.begin() + (t + 1) * n_cols);
      const std::vector<float> single = device_matmul(m, alone, 1, split);
      for (int64_t r = 0; r < n_rows; ++r)
        ASSERT_TRUE(same_bits(single[static_cast<size_t>(r)], batched[static_cast<size_t>(t * n_rows + r)]))
            << dtype_name(type) << (split ? " split" : "") << " token " << t << " row " << r;
    }
    // The split layout is the same arithmetic as the blocks: the same bits.
    if (split) {
      const std::vector<float> blocks = device_matmul(m, x, n_tokens, false);
      for (size_t i = 0; i < blocks.size(); ++i)
        ASSERT_TRUE(same_bits(blocks[i], batched[i])) << dtype_name(type) << " split vs blocks, element " << i;
    }
  }
}

// accumulate adds the product to what out holds, rounded once; out_stride writes into wider
// rows (a part of a concatenated output), leaving the other columns alone.
TEST_P(CudaMatmul, AccumulatesAndWritesIntoWiderRows) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const DType type = GetParam();
  std::mt19937 rng(31);
  const int64_t n_rows = 13, n_cols = 512, n_tokens = 3, stride = 20;
  const HostMatrix m = random_matrix(type, n_rows, n_cols, rng);
  const std::vector<float> x = random_floats(rng, n_tokens * n_cols, -1.0f, 1.0f);
  const std::vector<float> plain = device_matmul(m, x, n_tokens);
  const std::vector<float> base = random_floats(rng, n_tokens * stride, -4.0f, 4.0f);
  cuda::DeviceBuffer<uint8_t> weight(m.bytes);
  cuda::DeviceBuffer<float> x_device(x);
  cuda::DeviceBuffer<float> out(base);
  const cuda::DeviceMatrix matrix{weight.data(), type, n_rows, n_cols, m.view.row_bytes()};
  cuda::matmul(matrix, x_device.data(), n_tokens, out.data(), nullptr, /*accumulate=*/true, stride);
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = out.download();
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t c = 0; c < stride; ++c) {
      const size_t i = static_cast<size_t>(t * stride + c);
      const float expected = c < n_rows ? base[i] + plain[static_cast<size_t>(t * n_rows + c)] : base[i];
      ASSERT_TRUE(same_bits(got[i], expected)) << dtype_name(type) << " token " << t << " column " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryType, CudaMatmul,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K,
                                           DType::Q6_K),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace tandem
#endif
