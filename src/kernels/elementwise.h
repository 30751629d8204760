// Per-row kernels of the transformer block: RMSNorm, RoPE, SwiGLU, softmax. Each works on
// one row with a fixed reduction order, so a row's result never depends on its batch.
#pragma once

#include <cstdint>

namespace tandem {

// rmsnorm_row and rope_apply are the portable loops: the scalar level of kernel_table() and
// the reference the SIMD levels are tested against. The forward pass calls the active
// level's versions through kernel_table().rmsnorm / .rope.

// out = x / sqrt(mean(x²) + eps) * weight; x, out: [n] (may alias).
void rmsnorm_row(const float* x, const float* weight, int64_t n, float eps, float* out);

// Precomputed RoPE angles for one position: cos/sin of position * base^(-2i/rope_dims).
void rope_angles(int64_t position, int64_t rope_dims, float freq_base, float* cos_out, float* sin_out);
// Same, with pair i's frequency divided by freq_factors[i] (Llama 3 RoPE scaling); null: all 1.
void rope_angles(int64_t position, int64_t rope_dims, float freq_base, const float* freq_factors, float* cos_out,
                 float* sin_out);
// Rotates pairs (2i, 2i+1), i < rope_dims/2, of each of n_heads heads of x [n_heads, head_dim].
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos_table,
                const float* sin_table);

// out[i] = silu(gate[i]) * up[i] (may alias gate), through the active level's kernel
// (kernel_table().swiglu): the SIMD levels' exp is a polynomial rather than libm's (within 2 ulp).
void swiglu_row(const float* gate, const float* up, int64_t n, float* out);

// In place: x = softmax(x) over n elements.
void softmax_row(float* x, int64_t n);

}  // namespace tandem
