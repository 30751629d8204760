// GeGLU, Gemma's gated FFN activation: gelu(gate) * up with GELU in its tanh form
// (gelu_pytorch_tanh), the one Gemma was trained with and llama.cpp's ggml_gelu computes.
// One portable loop: the activation is a sliver of an FFN next to its three matmuls.
#pragma once

#include <cstdint>

namespace tandem {

// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
float gelu_tanh(float x);

// out[i] = gelu_tanh(gate[i]) * up[i]; out may alias gate.
void geglu_row(const float* gate, const float* up, int64_t n, float* out);

}  // namespace tandem
