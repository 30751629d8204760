// The scalar level's own kernels (portable C++, vectorized by the compiler for the baseline
// ISA): the reference every level is tested against, and the kernels of the scalar table.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem {

namespace portable {
// The scalar level's table (kernels/portable_table.cpp): these kernels and the scalar ones
// declared beside their contracts (dot.h, elementwise.h, geglu.h, swiglu_oai.h).
const KernelTable& level_table();
GemmFloatKernel gemm_float;
GemmQ8Kernel gemm_q8;
QuantizeQ8Kernel quantize_q8;    // kernels/dot.cpp
QuantizeQ8KKernel quantize_q8k;  // kernels/dot_kquants.cpp
// The scalar reference row kernels (kernels/dot_kquants.cpp, dot_low_bit_kquants.cpp).
KQuantRowDotFn kquant_row_dot(DType type);
AttentionKernel attention_group;
// Token by token through portable::attention_group.
AttentionTokensKernel attention_tokens;
// Row by row through dequantize_row (kernels/attention.cpp).
ConvertKvRowsKernel convert_kv_rows;
SwigluKernel swiglu_row;  // kernels/elementwise.cpp
}  // namespace portable

}  // namespace tandem
