// The AVX-512 level's table and the kernels that the table, the AMX level and the tests name
// (the packed GEMMs: gemm_packed.h, gemm_float_packed.h): each needs a CPU with AVX-512
// F/BW/VL/VNNI, the bf16 attention also AVX512_BF16. Each has the contract of the portable
// kernel of the same name (kernel_contract.h, elementwise.h, geglu.h, swiglu_oai.h,
// attention.h). The AMX level and the hub include this header; it names no level above.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem {

namespace avx512 {
// The level's table (kernels/avx512/avx512_table.cpp): the AVX2 table with every kernel below.
const KernelTable& level_table();
// A table whose attention is the bf16 kernel of `arithmetic` (Bf16 or Bf16Values).
KernelTable with_bf16_attention(const KernelTable& level, AttentionArithmetic arithmetic);
// The int8 layouts and the element-major float layout.
WeightPacker packer();

// GEMM on the file's row-major layout (kernels/avx512/gemm_avx512.cpp); the table sends packed
// weights to the kernels of gemm_packed.h and gemm_float_packed.h.
GemmFloatKernel gemm_float;
GemmQ8Kernel gemm_q8;
// Q5_0, Q5_1, IQ4_NL, MXFP4 on the file's blocks (kernels/avx512/gemm_q32_avx512.cpp); gemm_q8
// hands those types here, at the AVX-512 and AMX levels.
GemmQ8Kernel gemm_q32;
// K-quant row dot products (kernels/avx512/kquant_rows_avx512.cpp): every k-quant type, nullptr
// for any other; the scalar reference's bits. The AMX level's too.
KQuantRowDotFn kquant_row_dot(DType type);
QuantizeQ8Kernel quantize_q8;    // kernels/avx512/quantize_avx512.cpp
QuantizeQ8KKernel quantize_q8k;  // the same file
AttentionKernel attention_group;
ConvertKvRowsKernel convert_kv_rows;
// attention_tokens on the AVX-512 kernel (the portable one for head sizes it does not take).
AttentionTokensKernel attention_tokens;
// out[i] = exp(x[i]) for x[i] <= 0, exactly as the attention kernel's softmax computes it
// (within 2 ulp; 0 below -87 and for -inf); exposed for its test.
void attention_exp(const float* x, int64_t n, float* out);
// attention_group and attention_tokens with bf16 dot products (kernels/avx512/
// attention_bf16_avx512.cpp): Q, K, the softmax weights and V rounded to bf16, accumulated in
// float. Need AVX512_BF16.
AttentionKernel attention_group_bf16;
AttentionTokensKernel attention_tokens_bf16;
// The same with the scores in float (the f32 kernel's), only the weighted values in bf16.
AttentionKernel attention_group_bf16_values;
AttentionTokensKernel attention_tokens_bf16_values;

// Row kernels (kernels/avx512/elementwise_avx512.cpp): SwiGLU with the vector exp; RMSNorm's sum
// of squares in 4 x 16 float lanes, reduced in a fixed order (a row's bits depend only on the
// row); RoPE 8 pairs per vector, masked tail, dims past rope_dims untouched.
SwigluKernel swiglu_row;
RmsnormKernel rmsnorm_row;
RopeKernel rope_apply;
// Gemma's rows (kernels/avx512/geglu_avx512.cpp) and gpt-oss's clamped SwiGLU
// (kernels/avx512/swiglu_oai_avx512.cpp).
GegluKernel geglu_row;
SoftcapKernel softcap_row;
SwigluOaiKernel swiglu_oai_row;

// The instruction loops of the ceilings (kernels/avx512/instruction_peak_avx512.cpp).
InstructionLoop fma_f32_loop(int64_t iterations);
InstructionLoop dot_bf16_loop(int64_t iterations);  // needs AVX512_BF16
InstructionLoop dot_i8_loop(int64_t iterations);
}  // namespace avx512

}  // namespace tandem
