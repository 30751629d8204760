// kernel_table(): the table for each level, and the portable (compiler-vectorized) GEMM
// built from the row dot products in dot.cpp. AVX2 currently shares the portable kernels,
// whose dot products are compiled for x86-64-v3 by target_clones.
#include "kernels/kernel_table.h"

#include "base/error.h"
#include "kernels/amx/amx_gemm.h"

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

const KernelTable& kernel_table(Isa isa) {
  static const KernelTable kScalar{Isa::Scalar, portable::gemm_float, portable::gemm_q8,
                                          portable::attention_group};
  static const KernelTable kAvx2{Isa::Avx2, portable::gemm_float, portable::gemm_q8, portable::attention_group};
  static const KernelTable kAvx512{Isa::Avx512, avx512::gemm_float, avx512::gemm_q8,
                                          avx512::attention_group};
  static const KernelTable kAmx{Isa::Amx, amx::gemm_float, amx::gemm_q8, avx512::attention_group};
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
