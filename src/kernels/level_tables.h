// The table of each level, built in the level's folder as the level below plus its
// overrides (scalar: kernels/portable_table.cpp; kernels/avx2/avx2_table.cpp,
// kernels/avx512/avx512_table.cpp, kernels/amx/amx_table.cpp). Only the hub (kernel_table.cpp)
// and the level tables themselves include this; each needs its level on the CPU to run.
#pragma once

#include "kernels/kernel_contract.h"

namespace tandem {

namespace portable {
const KernelTable& level_table();
}  // namespace portable
namespace avx2 {
const KernelTable& level_table();
// The 8-bit integer layouts' packer (kernels/packed/), which the levels above keep.
WeightPacker int8_packer();
}  // namespace avx2
namespace avx512 {
const KernelTable& level_table();
// A table whose attention is the bf16 kernel of `arithmetic` (Bf16 or Bf16Values).
KernelTable with_bf16_attention(const KernelTable& level, AttentionArithmetic arithmetic);
// The int8 layouts and the element-major float layout.
WeightPacker packer();
}  // namespace avx512
namespace amx {
const KernelTable& level_table();
// With bf16 attention: Bf16 on the tile kernels (kernels/amx/attention_amx.cpp) when the CPU
// has AMX-BF16; Bf16Values (scores in f32), or no AMX-BF16, as avx512::with_bf16_attention.
KernelTable with_bf16_attention(const KernelTable& level, AttentionArithmetic arithmetic);
}  // namespace amx

}  // namespace tandem
