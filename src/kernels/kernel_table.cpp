// kernel_table(): the table of each level, the portable (compiler-vectorized) GEMMs built
// from the row dot products in dot.cpp, and the row-dot k-quant GEMM of the levels that do
// not repack k-quant weights.
#include "kernels/kernel_table.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/amx/amx_gemm.h"
#include "kernels/amx/amx_kquant_gemm.h"
#include "kernels/attention.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/elementwise.h"

namespace tandem {

namespace portable {

void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = row_begin; r < row_end; ++r)
      out[t * out_stride + r] = dot_float_activations(weight.dtype, weight.row(r), x + t * n_in, n_in);
}

void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
             int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = row_begin; r < row_end; ++r)
      out[t * out_stride + r] = dot_q8_activations(weight.dtype, weight.row(r), x + t * (n_in / 32), n_in);
}

}  // namespace portable

void gemm_q8k_rows(Isa isa, const TensorView& weight, int64_t row_begin, int64_t row_end,
                   const ActivationBlockQ8K* x, int64_t n_tokens, float* out, int64_t out_stride) {
  constexpr int64_t kRowTile = 16;
  const int64_t blocks_per_row = weight.row_length() / 256;
  const KQuantRowDotFn dot = kquant_row_dot(isa, weight.dtype);
  for (int64_t tile = row_begin; tile < row_end; tile += kRowTile) {
    const int64_t tile_end = std::min(row_end, tile + kRowTile);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = tile; r < tile_end; ++r)
        out[t * out_stride + r] = dot(weight.row(r), x + t * blocks_per_row, blocks_per_row);
  }
}

namespace {

template <Isa kIsa>
void gemm_q8k_level(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                    int64_t n_tokens, float* out, int64_t out_stride) {
  gemm_q8k_rows(kIsa, weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

// AMX: repacked Q4_K/Q6_K weights go to the tile kernel (it walks its row groups itself);
// types it does not repack use the AVX-512 row dot products.
void gemm_q8k_amx(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                  int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return amx::gemm_kquant(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8k_rows(Isa::Avx512, weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

template <Isa kIsa>
float dot_q8k_level(DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n) {
  return dot_q8k_activations_isa(kIsa, type, weight_row, x, n);
}

}  // namespace

const KernelTable& kernel_table(Isa isa) {
  static const KernelTable kScalar{Isa::Scalar,
                                   portable::gemm_float,
                                   portable::gemm_q8,
                                   gemm_q8k_level<Isa::Scalar>,
                                   dot_q8k_level<Isa::Scalar>,
                                   portable::quantize_q8,
                                   portable::quantize_q8k,
                                   portable::attention_group,
                                   portable::attention_tokens,
                                   portable::swiglu_row,
                                   false};
  static const KernelTable kAvx2{Isa::Avx2,
                                 avx2::gemm_float,
                                 avx2::gemm_q8,
                                 avx2::gemm_q8k,
                                 dot_q8k_level<Isa::Avx2>,
                                 avx2::quantize_q8,
                                 avx2::quantize_q8k,
                                 avx2::attention_group,
                                 avx2::attention_tokens,
                                 avx2::swiglu_row,
                                 false};
  static const KernelTable kAvx512{Isa::Avx512,
                                   avx512::gemm_float,
                                   avx512::gemm_q8,
                                   gemm_q8k_level<Isa::Avx512>,
                                   dot_q8k_level<Isa::Avx512>,
                                   avx512::quantize_q8,
                                   avx512::quantize_q8k,
                                   avx512::attention_group,
                                   avx512::attention_tokens,
                                   avx512::swiglu_row,
                                   false};
  static const KernelTable kAmx{Isa::Amx,
                                amx::gemm_float,
                                amx::gemm_q8,
                                gemm_q8k_amx,
                                dot_q8k_level<Isa::Avx512>,
                                avx512::quantize_q8,
                                avx512::quantize_q8k,
                                avx512::attention_group,
                                avx512::attention_tokens,
                                avx512::swiglu_row,
                                true};
  TANDEM_ASSERT(static_cast<int>(isa) <= static_cast<int>(detect_isa()));
  switch (isa) {
    case Isa::Scalar: return kScalar;
    case Isa::Avx2: return kAvx2;
    case Isa::Avx512: return kAvx512;
    case Isa::Amx: return kAmx;
  }
  return kScalar;
}

const KernelTable& kernel_table() {
  static const KernelTable& table = kernel_table(active_isa());
  return table;
}

}  // namespace tandem
