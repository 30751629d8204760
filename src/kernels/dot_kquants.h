// Row dot products for k-quant weights (Q4_K, Q5_K, Q6_K, Q8_K; Q2_K, Q3_K and IQ4_XS in
// dot_low_bit_kquants.cpp) against activations quantized
// to 256-element 8-bit blocks. Integer products within each sub-block, the sub-block scales
// applied in integers, one float update per 256-element block in row order: the result
// depends only on (weight row, activation row), and every ISA variant returns the same bits.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "base/tensor_view.h"
#include "kernels/cpu_features.h"

namespace tandem {

// 256 activations: value = scale * quants[i]; block_sums[j] = sum of quants[16j .. 16j+15]
// (the Q4_K/Q5_K mins and the Q6_K offset of 32 multiply these instead of every element).
struct ActivationBlockQ8K {
  float scale;
  int8_t quants[256];
  int16_t block_sums[16];
};

inline bool uses_q8k_activations(DType type) {
  return type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K || type == DType::Q8_K ||
         type == DType::Q2_K || type == DType::Q3_K || type == DType::IQ4_XS;
}

// Quantizes n floats (n a multiple of 256) into n/256 blocks; quants in [-127, 127].
void quantize_activations_q8k(const float* x, int64_t n, ActivationBlockQ8K* out);
// The variant of one level (kernel_table(isa).quantize_q8k); every variant writes the same bytes.
void quantize_activations_q8k_isa(Isa isa, const float* x, int64_t n, ActivationBlockQ8K* out);

// dot(weight row of `type`, quantized activation row), n elements (a multiple of 256), with
// the variant of the active level (kernel_table()). All variants give the same bits.
float dot_q8k_activations(DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n);

// A level's row kernel for one k-quant type: fn(weight_row, x, n / 256 blocks). Each level's
// table names its kernels (KernelTable::kquant_row_dot, kernels/kernel_contract.h).
using KQuantRowDotFn = float (*)(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks);
// The k-quant GEMM of the levels without repacked k-quant weights: each (row, token) one call
// of the level's row dot product `dot` (for weight.dtype), row tiles outside so a tile stays in
// cache across tokens.
void gemm_q8k_rows(KQuantRowDotFn dot, const TensorView& weight, int64_t row_begin, int64_t row_end,
                   const ActivationBlockQ8K* x, int64_t n_tokens, float* out, int64_t out_stride);

// One level's (kernel_table(isa).kquant_row_dot), so tests can hold each against the scalar
// reference; isa <= detect_isa().
float dot_q8k_activations_isa(Isa isa, DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n);

}  // namespace tandem
