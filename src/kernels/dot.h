// Row dot products: one weight row (stored type) against one activation row. Every matmul
// output element is exactly one call here, whatever the batch size or thread split, which
// is what makes results batch-invariant. Quantized weight types dot against activations
// quantized to 8-bit blocks (ActivationBlockQ8) with integer products inside each block.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/cpu_features.h"

namespace tandem {

// 32 activations quantized symmetrically: value = scale * q.
struct ActivationBlockQ8 {
  float scale;
  int8_t quants[32];
};

// Which activation form a weight type's dot product consumes.
inline bool uses_q8_activations(DType type) {
  return type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q5_0 || type == DType::Q5_1 ||
         type == DType::IQ4_NL || type == DType::MXFP4;
}

// Quantizes n floats (n a multiple of 32) into n/32 activation blocks.
void quantize_activations_q8(const float* x, int64_t n, ActivationBlockQ8* out);
// The variant of one level (kernel_table(isa).quantize_q8); every variant writes the same bytes.
void quantize_activations_q8_isa(Isa isa, const float* x, int64_t n, ActivationBlockQ8* out);

// dot(weight row of `type`, float row) for F32, F16 and BF16 weights; n elements.
float dot_float_activations(DType type, const void* weight_row, const float* x, int64_t n);
// dot(weight row of `type`, quantized row) for Q8_0, Q4_0 and the formats of dot_q32.h; n elements.
float dot_q8_activations(DType type, const void* weight_row, const ActivationBlockQ8* x, int64_t n);

// Plain float dot product with a fixed reduction order (attention uses it).
float dot_f32(const float* a, const float* b, int64_t n);
// y[i] += a * x[i].
void axpy_f32(float a, const float* x, float* y, int64_t n);

}  // namespace tandem
