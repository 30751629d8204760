// Gemma's tanh-based row kernels: GeGLU, the gated FFN activation gelu(gate) * up with GELU
// in its tanh form (gelu_pytorch_tanh, the one Gemma was trained with and llama.cpp's
// ggml_gelu computes), and logit soft-capping, cap * tanh(x / cap) (Gemma 2's final logits).
// Each element on its own: a row's result never depends on the batch. geglu_row and
// softcap_row run the active level's kernels (kernel_table().geglu / .softcap); the SIMD levels
// use their own tanh and exp (within a few ulp), the scalar level the portable loops below.
#pragma once

#include <cstdint>

namespace tandem {

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
float gelu_tanh(float x);

// out[i] = gelu_tanh(gate[i]) * up[i]; gate, up, out: [n]; out may alias gate.
void geglu_row(const float* gate, const float* up, int64_t n, float* out);

// out[i] = cap * tanh(x[i] / cap); x, out: [n] (may alias); cap > 0.
void softcap_row(const float* x, int64_t n, float cap, float* out);

namespace portable {
// The scalar loops (std::tanh per element): the scalar level and the reference of the others.
void geglu_row(const float* gate, const float* up, int64_t n, float* out);
void softcap_row(const float* x, int64_t n, float cap, float* out);
}  // namespace portable

}  // namespace tandem
