// The device row kernels (elementwise.h). Products that the CPU rounds one by one are
// rounded one by one here too (__fmul_rn, __fsub_rn): nvcc would otherwise fuse them.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/rmsnorm_scale.h"

namespace tandem::cuda {
namespace {

__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_kernel(const float* x, const float* weight, int64_t n, float eps, float* out) {
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  float* out_row = out + static_cast<int64_t>(blockIdx.x) * n;
  // Every thread has the scale before any writes out (out may alias x).
  const float scale = rmsnorm_scale(row, n, eps);
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads) out_row[i] = __fmul_rn(__fmul_rn(row[i], scale), weight[i]);
}

// One thread per (token, head, pair).
__global__ void rope_kernel(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                            int64_t rope_dims, const int32_t* positions, float freq_base, const float* freq_factors,
                            bool half_split) {
  const int64_t n_pairs = rope_dims / 2;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= n_tokens * n_heads * n_pairs) return;
  const int64_t i = index % n_pairs;
  const int64_t head = (index / n_pairs) % n_heads;
  const int64_t t = index / (n_pairs * n_heads);
  double frequency =
      pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / static_cast<double>(rope_dims));
  if (freq_factors != nullptr) frequency /= freq_factors[i];
  const double angle = static_cast<double>(positions[t]) * frequency;
  const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
  float* h = x + t * row_stride + head * head_dim;
  float* first = half_split ? h + i : h + 2 * i;
  float* second = half_split ? h + i + n_pairs : h + 2 * i + 1;
  const float a = *first, b = *second;
  *first = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
  *second = __fadd_rn(__fmul_rn(a, s), __fmul_rn(b, c));
}

__global__ void swiglu_kernel(const float* gate, const float* up, int64_t n, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), up[i]);
}

__global__ void swiglu_rows_kernel(const float* gate_up, int64_t n_rows, int64_t n, float* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_rows * n) return;
  const int64_t r = i / n, e = i % n;
  const float g = gate_up[r * 2 * n + e];
  out[i] = __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), gate_up[r * 2 * n + n + e]);
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void rmsnorm(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps, float* out,
             cudaStream_t stream) {
  if (n_rows == 0) return;
  rmsnorm_kernel<<<static_cast<unsigned>(n_rows), kNormThreads, 0, stream>>>(x, weight, n, eps, out);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void rope(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t rope_dims,
          const int32_t* positions, float freq_base, const float* freq_factors, bool half_split, cudaStream_t stream) {
  const int64_t n = n_tokens * n_heads * (rope_dims / 2);
  if (n == 0) return;
  rope_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(x, n_tokens, row_stride, n_heads, head_dim, rope_dims, positions,
                                                      freq_base, freq_factors, half_split);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void swiglu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream) {
  if (n == 0) return;
  swiglu_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(gate, up, n, out);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void swiglu_rows(const float* gate_up, int64_t n_rows, int64_t n, float* out, cudaStream_t stream) {
  if (n_rows * n == 0) return;
  swiglu_rows_kernel<<<blocks_for(n_rows * n, 256), 256, 0, stream>>>(gate_up, n_rows, n, out);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace tandem::cuda
