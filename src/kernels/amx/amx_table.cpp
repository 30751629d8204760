// The AMX level's table (kernels/level_tables.h): the AVX-512 table with the 8-bit GEMMs
// overridden by the AMX tile kernels; everything else is AVX-512's.
#include "kernels/amx/amx_gemm.h"
#include "kernels/amx/amx_kquant_gemm.h"
#include "kernels/level_tables.h"

namespace tandem::amx {
namespace {

void gemm_q8k_dispatch(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                       int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return gemm_kquant(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8k_rows(Isa::Avx512, weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

}  // namespace

const KernelTable& level_table() {
  static const KernelTable table = [] {
    KernelTable level = avx512::level_table();
    level.isa = Isa::Amx;
    level.gemm_q8 = gemm_q8;
    level.gemm_q8k = gemm_q8k_dispatch;
    return level;
  }();
  return table;
}

}  // namespace tandem::amx
