// gpt-oss's expert activation (ggml's swiglu_oai): the gate clamped from above and the up
// projection on both sides at kSwigluOaiLimit, then g·sigmoid(alpha·g)·(u + 1). The constants
// are the ones llama.cpp and HF's GptOssExperts hard-code (gpt-oss's config has no key for them).
// swiglu_oai_row runs the active level's kernel (kernel_table().swiglu_oai): the scalar level
// is the portable loop below, the SIMD levels use their vector exp (within a few ulp of it).
// Each element on its own: a row's result never depends on the batch.
#pragma once

#include <cstdint>

namespace tandem {

constexpr float kSwigluOaiAlpha = 1.702f;
constexpr float kSwigluOaiLimit = 7.0f;

// out[i] = g·sigmoid(alpha·g)·(u + 1), g = min(gate[i], limit), u = clamp(up[i], -limit, limit);
// gate, up, out: [n]; out may alias gate. A NaN gate or up gives NaN (the clamps keep it).
void swiglu_oai_row(const float* gate, const float* up, int64_t n, float* out);

namespace portable {
// The scalar loop, g / (1 + exp(-alpha·g)) · (u + 1) in float with libm's exp, as ggml computes
// it: the scalar level and the reference of the others.
void swiglu_oai_row(const float* gate, const float* up, int64_t n, float* out);
}  // namespace portable

}  // namespace tandem
