// RMSNorm's per-row scale on the device, shared by the kernels that normalise a row
// (elementwise.cu's rmsnorm, matmul_f16_mma.cu's rmsnorm_pack): one definition, so both give
// the same bits as each other and as the CPU reference's double sum of squares.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

constexpr int kNormThreads = 256;  // a block of this many threads normalises a row

// 1 / sqrt(mean(row^2) + eps): each thread sums its strided elements' squares in double,
// then a fixed tree over the block adds the partial sums (the same order whatever the
// batch). Every thread of a kNormThreads block must call it; each gets the scale.
__device__ __forceinline__ float rmsnorm_scale(const float* __restrict__ row, int64_t n, float eps) {
  __shared__ double partial[kNormThreads];
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) sum += static_cast<double>(row[i]) * row[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kNormThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  return static_cast<float>(1.0 / sqrt(partial[0] / static_cast<double>(n) + eps));
}

}  // namespace tandem::cuda
