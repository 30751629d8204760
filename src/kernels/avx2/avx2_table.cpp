// The AVX2 level's table (declared in kernels/avx2/avx2_kernels.h): the scalar table with every kernel
// overridden by this level's, and the packer of the 8-bit integer layouts (kernels/packed/).
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/packed/kquant_layout.h"
#include "kernels/packed/q8_layout.h"
#include "kernels/portable_kernels.h"

namespace tandem::avx2 {
namespace {

bool packable_int8(const TensorView& weight) { return packed::q8_packable(weight) || packed::kquant_packable(weight); }
int64_t packed_bytes_int8(const TensorView& weight) {
  return packed::kquant_packable(weight) ? packed::kquant_packed_bytes(weight) : packed::q8_packed_bytes(weight);
}
void pack_into_int8(const TensorView& weight, uint8_t* out) {
  if (packed::kquant_packable(weight))
    packed::kquant_pack_into(weight, out);
  else
    packed::q8_pack_into(weight, out);
}

}  // namespace

WeightPacker int8_packer() { return {packable_int8, packed_bytes_int8, pack_into_int8}; }

const KernelTable& level_table() {
  static const KernelTable table = [] {
    KernelTable level = portable::level_table();
    level.isa = Isa::Avx2;
    level.gemm_float = gemm_float;
    level.gemm_q8 = gemm_q8;
    level.gemm_q8k = gemm_q8k;
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
    level.packer = int8_packer();
    level.instruction_loops.fma_f32 = fma_f32_loop;
    level.instruction_loops.dot_i8 = dot_i8_loop;
    return level;
  }();
  return table;
}

}  // namespace tandem::avx2
