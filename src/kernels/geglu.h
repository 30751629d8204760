// Gemma's tanh-based row kernels: GeGLU, the gated FFN activation gelu(gate) * up with GELU
// in its tanh form (gelu_pytorch_tanh, the one Gemma was trained with and llama.cpp's
// ggml_gelu computes), and logit soft-capping, cap * tanh(x / cap) (Gemma 2's final logits).
// Each element on its own: a row's result never depends on the batch.
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
// The scalar loops (std::tanh per element).
void geglu_row(const float* gate, const float* up, int64_t n, float* out);
void softcap_row(const float* x, int64_t n, float cap, float* out);
}  // namespace portable

}  // namespace tandem
