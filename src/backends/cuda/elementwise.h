// Row kernels of the transformer block on the device: RMSNorm, RoPE (both pairings of
// model_config.h RopePairing), SwiGLU. Each row's result depends on that row alone (fixed
// reduction order), as on the CPU (kernels/elementwise.h). All pointers are device memory;
// every call is asynchronous on `stream` and throws CudaError if the launch fails.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tandem::cuda {

// out[r, i] = x[r, i] * (1 / sqrt(mean_i(x[r]^2) + eps)) * weight[i]; x, out: [n_rows, n]
// (may alias). The sum of squares in double, per thread then a fixed tree.
void rmsnorm(const float* x, const float* weight, int64_t n_rows, int64_t n, float eps, float* out,
             cudaStream_t stream);

// In place on x [n_tokens, row_stride]: each of n_heads heads (head_dim apart, from the row's
// start) has its first rope_dims elements rotated by positions[t] * freq_base^(-2i/rope_dims)
// (divided by freq_factors[i] when given, Llama 3 scaling; device memory or null), angles in
// double as rope_angles computes them. half_split false: pairs (2i, 2i+1) (llama.cpp "normal");
// true: pairs (i, i + rope_dims/2) (NEOX, rotate_half).
void rope(float* x, int64_t n_tokens, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t rope_dims,
          const int32_t* positions, float freq_base, const float* freq_factors, bool half_split, cudaStream_t stream);

// out[i] = silu(gate[i]) * up[i] over n elements (out may alias gate).
void swiglu(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

// The same over rows of a concatenated gate/up output: gate_up [n_rows, 2 * n] (gate in
// columns 0..n-1, up in n..2n-1), out [n_rows, n].
void swiglu_rows(const float* gate_up, int64_t n_rows, int64_t n, float* out, cudaStream_t stream);

}  // namespace tandem::cuda
