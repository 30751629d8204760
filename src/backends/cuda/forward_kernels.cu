// The forward pass's glue kernels (forward_kernels.h): one thread per element.
#include <cuda_fp16.h>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/forward_kernels.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void add_kernel(float* rows, const float* delta, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) rows[i] = __fadd_rn(rows[i], delta[i]);
}

// One thread per (token, K or V, element).
__global__ void store_kv_kernel(const float* rows, int64_t n_tokens, int64_t row_stride, int64_t width,
                                const int32_t* slots, bool as_f16, uint8_t* keys, uint8_t* values, int64_t row_bytes) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= n_tokens * 2 * width) return;
  const int64_t t = i / (2 * width), e = i % (2 * width);
  const float value = rows[t * row_stride + e];
  uint8_t* row = (e < width ? keys : values) + static_cast<int64_t>(slots[t]) * row_bytes;
  const int64_t k = e < width ? e : e - width;
  if (as_f16)
    reinterpret_cast<__half*>(row)[k] = __float2half_rn(value);
  else
    reinterpret_cast<float*>(row)[k] = value;
}

__global__ void gather_kernel(const float* rows, const int32_t* indices, int64_t n_out, int64_t width, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n_out * width) out[i] = rows[static_cast<int64_t>(indices[i / width]) * width + i % width];
}

}  // namespace

void add_in_place(float* rows, const float* delta, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(rows, delta, n);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void store_kv_rows(const float* rows, int64_t n_tokens, int64_t row_stride, int64_t width, const int32_t* slots,
                   DType type, uint8_t* keys, uint8_t* values, int64_t row_bytes, cudaStream_t stream) {
  if (type != DType::F32 && type != DType::F16)
    throw CudaError("cuda::store_kv_rows: the device KV cache holds F32 or F16 rows, not " +
                    std::string(dtype_name(type)));
  if (n_tokens * width == 0) return;
  store_kv_kernel<<<blocks_for(n_tokens * 2 * width), kThreads, 0, stream>>>(
      rows, n_tokens, row_stride, width, slots, type == DType::F16, keys, values, row_bytes);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void gather_rows(const float* rows, const int32_t* indices, int64_t n_out, int64_t width, float* out,
                 cudaStream_t stream) {
  if (n_out * width == 0) return;
  gather_kernel<<<blocks_for(n_out * width), kThreads, 0, stream>>>(rows, indices, n_out, width, out);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
