// Row conversion between float and the stored weight types (F32, F16, BF16, Q8_0, Q4_0, the
// k-quants of base/kquants.h and the 32-element formats of base/quant32.h).
// These are the plain reference conversions: the model loader, gen-model and the tests use
// them; hot-path kernels in src/kernels compute on the stored blocks directly.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace tandem {

// Is `type` one Tandem can compute with (and so quantize to / dequantize from)?
bool dtype_is_computable(DType type);

// Converts n floats to `type` into dst (dtype_row_bytes(type, n) bytes).
// n must be a multiple of the type's block size.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// Converts n elements stored as `type` at src into floats.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace tandem
