// The AVX-512 level's table (declared in kernels/avx512/avx512_kernels.h): the AVX2 table with every kernel
// overridden by this level's, packed weights sent to the kernels on their layouts, the packer
// of the int8 layouts plus the element-major float layout, and the bf16-attention variants.
#include "kernels/avx512/avx512_kernels.h"

#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/gemm_float_packed.h"
#include "kernels/avx512/gemm_packed.h"

namespace tandem::avx512 {
namespace {

// AVX-512 and AMX levels: packed weights go to the kernels on their layout; weights left as
// the file has them (no layout for the type or shape) to the row-major kernels.
void gemm_float_dispatch(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                         float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return gemm_float_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_float(weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

void gemm_q8_dispatch(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                      int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return gemm_q8_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8(weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

void gemm_q8k_dispatch(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                       int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return gemm_kquant_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8k_rows(kquant_row_dot(weight.dtype), weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

bool packable_avx512(const TensorView& weight) {
  return avx2::int8_packer().packable(weight) || float_packable(weight);
}
int64_t packed_bytes_avx512(const TensorView& weight) {
  return float_packable(weight) ? float_packed_bytes(weight) : avx2::int8_packer().packed_bytes(weight);
}
void pack_into_avx512(const TensorView& weight, uint8_t* out) {
  if (float_packable(weight))
    float_pack_into(weight, out);
  else
    avx2::int8_packer().pack_into(weight, out);
}

}  // namespace

KernelTable with_bf16_attention(const KernelTable& level, AttentionArithmetic arithmetic) {
  KernelTable table = level;
  const bool values_only = arithmetic == AttentionArithmetic::Bf16Values;
  table.attention = values_only ? attention_group_bf16_values : attention_group_bf16;
  table.attention_tokens = values_only ? attention_tokens_bf16_values : attention_tokens_bf16;
  table.attention_arithmetic = arithmetic;
  return table;
}

WeightPacker packer() { return {packable_avx512, packed_bytes_avx512, pack_into_avx512}; }

const KernelTable& level_table() {
  static const KernelTable table = [] {
    KernelTable level = avx2::level_table();
    level.isa = Isa::Avx512;
    level.gemm_float = gemm_float_dispatch;
    level.gemm_q8 = gemm_q8_dispatch;
    level.gemm_q8k = gemm_q8k_dispatch;
    level.kquant_row_dot = kquant_row_dot;
    level.quantize_q8 = quantize_q8;
    level.quantize_q8k = quantize_q8k;
    level.attention = attention_group;
    level.attention_tokens = attention_tokens;
    level.convert_kv_rows = convert_kv_rows;
    level.swiglu = swiglu_row;
    level.rmsnorm = rmsnorm_row;
    level.rope = rope_apply;
    level.geglu = geglu_row;
    level.softcap = softcap_row;
    level.swiglu_oai = swiglu_oai_row;
    level.packer = packer();
    level.instruction_loops.fma_f32 = fma_f32_loop;
    level.instruction_loops.dot_i8 = dot_i8_loop;
    if (cpu_has_avx512_bf16()) level.instruction_loops.dot_bf16 = dot_bf16_loop;
    return level;
  }();
  return table;
}

}  // namespace tandem::avx512
