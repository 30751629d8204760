// The device row kernels (backends/cuda/elementwise.h) against the CPU's: RMSNorm and SwiGLU
// against the portable rows, RoPE against rope_angles + rope_apply for adjacent pairs and
// against the same rotation on (i, i + rope_dims/2) for NEOX, on odd sizes and positions; and
// a row's result alone equals its result in a batch. Skips without a device.
#if defined(TANDEM_WITH_CUDA)
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/elementwise.h"
#include "cuda/cuda_test_device.h"
#include "kernels/elementwise.h"
#include "kernels/kernel_table.h"
#include "support/float_ulps.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

TEST(CudaElementwise, RmsnormMatchesTheCpuRowAndIsPerRow) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(3);
  const int64_t n_rows = 5, n = 4099;
  const std::vector<float> x = random_floats(rng, n_rows * n, -3.0f, 3.0f);
  const std::vector<float> weight = random_floats(rng, n, 0.5f, 1.5f);
  cuda::DeviceBuffer<float> x_device(x), weight_device(weight), out(n_rows * n);
  cuda::rmsnorm(x_device.data(), weight_device.data(), n_rows, n, 1e-5f, out.data(), nullptr);
  const std::vector<float> got = out.download();
  std::vector<float> expected(static_cast<size_t>(n));
  for (int64_t r = 0; r < n_rows; ++r) {
    rmsnorm_row(x.data() + r * n, weight.data(), n, 1e-5f, expected.data());
    for (int64_t i = 0; i < n; ++i)  // the scale's double sum in another order: a few ulps at most
      ASSERT_LE(ulp_error(got[static_cast<size_t>(r * n + i)], expected[static_cast<size_t>(i)]), 4.0)
          << "row " << r << " element " << i;
  }
  cuda::rmsnorm(x_device.data() + 3 * n, weight_device.data(), 1, n, 1e-5f, out.data(), nullptr);
  const std::vector<float> alone = out.download();
  for (int64_t i = 0; i < n; ++i)
    ASSERT_TRUE(same_bits(alone[static_cast<size_t>(i)], got[static_cast<size_t>(3 * n + i)])) << "element " << i;
}

TEST(CudaElementwise, SwigluMatchesThePortableRow) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(5);
  const int64_t n = 1001;
  const std::vector<float> gate = random_floats(rng, n, -12.0f, 12.0f), up = random_floats(rng, n, -2.0f, 2.0f);
  cuda::DeviceBuffer<float> gate_device(gate), up_device(up), out(n);
  cuda::swiglu(gate_device.data(), up_device.data(), n, out.data(), nullptr);
  const std::vector<float> got = out.download();
  std::vector<float> expected(static_cast<size_t>(n));
  portable::swiglu_row(gate.data(), up.data(), n, expected.data());
  for (int64_t i = 0; i < n; ++i)  // CUDA's expf is within 2 ulp, then a division and a product
    ASSERT_LE(ulp_error(got[static_cast<size_t>(i)], expected[static_cast<size_t>(i)]), 8.0) << "element " << i;
}

// x [n_tokens, n_heads * head_dim] rotated on the CPU: adjacent pairs by rope_apply; NEOX by
// moving element i + half next to element i, rotating adjacent pairs, and moving back.
std::vector<float> cpu_rope(std::vector<float> x, int64_t n_heads, int64_t head_dim, int64_t rope_dims,
                            const std::vector<int32_t>& positions, float base, bool half_split) {
  const int64_t half = rope_dims / 2, row = n_heads * head_dim;
  std::vector<float> cos_table(static_cast<size_t>(half)), sin_table(static_cast<size_t>(half));
  std::vector<float> head(static_cast<size_t>(head_dim));
  for (size_t t = 0; t < positions.size(); ++t) {
    rope_angles(positions[t], rope_dims, base, cos_table.data(), sin_table.data());
    for (int64_t h = 0; h < n_heads; ++h) {
      float* x_head = x.data() + static_cast<int64_t>(t) * row + h * head_dim;
      if (!half_split) {
        rope_apply(x_head, 1, head_dim, rope_dims, cos_table.data(), sin_table.data());
        continue;
      }
      for (int64_t i = 0; i < half; ++i) {
        head[static_cast<size_t>(2 * i)] = x_head[i];
        head[static_cast<size_t>(2 * i + 1)] = x_head[i + half];
      }
      rope_apply(head.data(), 1, head_dim, rope_dims, cos_table.data(), sin_table.data());
      for (int64_t i = 0; i < half; ++i) {
        x_head[i] = head[static_cast<size_t>(2 * i)];
        x_head[i + half] = head[static_cast<size_t>(2 * i + 1)];
      }
    }
  }
  return x;
}

TEST(CudaElementwise, RopeMatchesTheCpuInBothPairings) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  std::mt19937 rng(11);
  const int64_t n_heads = 3, head_dim = 64, n_tokens = 7;
  const std::vector<int32_t> positions = {0, 1, 2, 17, 511, 4095, 30001};
  for (const bool half_split : {false, true}) {
    for (const int64_t rope_dims : {int64_t{64}, int64_t{32}}) {
      const std::vector<float> x = random_floats(rng, n_tokens * n_heads * head_dim, -2.0f, 2.0f);
      cuda::DeviceBuffer<float> x_device(x);
      cuda::DeviceBuffer<int32_t> positions_device(positions);
      cuda::rope(x_device.data(), n_tokens, n_heads * head_dim, n_heads, head_dim, rope_dims, positions_device.data(),
                 10000.0f, nullptr, half_split, nullptr);
      const std::vector<float> got = x_device.download();
      const std::vector<float> expected = cpu_rope(x, n_heads, head_dim, rope_dims, positions, 10000.0f, half_split);
      for (size_t i = 0; i < got.size(); ++i)  // the angles' double cos/sin may differ in the last float bit
        ASSERT_NEAR(got[i], expected[i], 2e-6f)
            << (half_split ? "neox" : "normal") << " rope_dims " << rope_dims << " element " << i;
    }
  }
}

}  // namespace
}  // namespace tandem
#endif
