// Plain scalar reference kernels: the definition of what every optimized kernel computes.
// They accumulate in double, favour clarity over speed, and are always built so tests can
// hold the fast kernels against them.
#pragma once

#include <cstdint>

#include "base/tensor_view.h"

namespace tandem::ref {

// out[t, r] = sum_c weight[r, c] * x[t, c]; weight any computable dtype, dequantized exactly.
// x: [n_tokens, n_in], out: [n_tokens, n_out].
void matmul(const TensorView& weight, const float* x, int64_t n_tokens, float* out);

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], over rows of length n.
void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// Rotates pairs (2i, 2i+1), i < rope_dims/2, of each head of x [n_heads, head_dim] by
// position * freq_base^(-2i/rope_dims).
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t position, float freq_base);

// out[i] = silu(gate[i]) * up[i].
void swiglu(const float* gate, const float* up, int64_t n, float* out);

}  // namespace tandem::ref
