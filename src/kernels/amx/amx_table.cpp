// The AMX level's table (declared in kernels/amx/amx_kernels.h): the AVX-512 table with the
// 8-bit GEMMs overridden by the AMX tile kernels, the tile instruction loop where the CPU has
// AMX-BF16, and bf16 attention on AMX-BF16 tiles when asked for; everything else is AVX-512's.
#include "kernels/amx/amx_kernels.h"

#include "kernels/amx/amx_gemm.h"
#include "kernels/amx/amx_kquant_gemm.h"
#include "kernels/amx/attention_amx.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/cpu_features.h"

namespace tandem::amx {
namespace {

void gemm_q8k_dispatch(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                       int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return gemm_kquant(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8k_rows(avx512::kquant_row_dot(weight.dtype), weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

}  // namespace

const KernelTable& level_table() {
  static const KernelTable table = [] {
    KernelTable level = avx512::level_table();
    level.isa = Isa::Amx;
    level.gemm_q8 = gemm_q8;
    level.gemm_q8k = gemm_q8k_dispatch;
    if (cpu_has_amx_bf16()) level.instruction_loops.tile_bf16 = tile_bf16_loop;
    return level;
  }();
  return table;
}

KernelTable with_bf16_attention(const KernelTable& level, AttentionArithmetic arithmetic) {
  KernelTable table = avx512::with_bf16_attention(level, arithmetic);
  if (arithmetic == AttentionArithmetic::Bf16 && cpu_has_amx_bf16()) {
    table.attention = attention_group_bf16;
    table.attention_tokens = attention_tokens_bf16;
    table.attention_on_tiles = true;
  }
  return table;
}

}  // namespace tandem::amx
