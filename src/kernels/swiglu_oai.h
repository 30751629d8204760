// gpt-oss's expert activation (ggml's swiglu_oai): the gate clamped from above and the up
// projection on both sides at kSwigluOaiLimit, then g·sigmoid(alpha·g)·(u + 1). The constants
// are the ones llama.cpp and HF's GptOssExperts hard-code (gpt-oss's config has no key for them).
// One portable loop, as GeGLU's: the activation is a sliver of an expert next to its matmuls.
#pragma once

#include <cstdint>

namespace tandem {

constexpr float kSwigluOaiAlpha = 1.702f;
constexpr float kSwigluOaiLimit = 7.0f;

// out[i] = g·sigmoid(alpha·g)·(u + 1), g = min(gate[i], limit), u = clamp(up[i], -limit, limit);
// out may alias gate.
void swiglu_oai_row(const float* gate, const float* up, int64_t n, float* out);

}  // namespace tandem
