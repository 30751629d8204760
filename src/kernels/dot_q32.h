// The portable (scalar level) row dot products of the 32-element formats of base/quant32.h —
// Q5_0, Q5_1, IQ4_NL, MXFP4 — against activations in 8-bit blocks (ActivationBlockQ8): each
// block's products summed as integers, then scaled once. The AVX2 and AVX-512 levels compute
// the same integers per block in their own GEMMs (kernels/avx2/gemm_q32_avx2.cpp,
// kernels/avx512/gemm_q32_avx512.cpp); only the float steps after them differ by level.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/dot.h"

namespace tandem {

inline bool is_q32_format(DType type) {
  return type == DType::Q5_0 || type == DType::Q5_1 || type == DType::IQ4_NL || type == DType::MXFP4;
}

// dot(weight row of `type`, quantized row); n elements, a multiple of 32.
float dot_q32_activations(DType type, const void* weight_row, const ActivationBlockQ8* x, int64_t n);

}  // namespace tandem
