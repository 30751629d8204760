// The AVX2 level's kernels (AVX2 + FMA + F16C, 256-bit vectors: Zen 2/3, Intel client chips).
// The level's table (kernel_table(Isa::Avx2)) points at these; each needs a CPU with that level.
// Every one has the same contract as the portable kernel of the same name (kernel_contract.h,
// elementwise.h, attention.h, dot.h, dot_kquants.h), and the tests hold each against the scalar
// reference. The levels above and the hub include this header; it names no level above.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem::avx2 {

// The level's table (kernels/avx2/avx2_table.cpp): the scalar table with every kernel below.
const KernelTable& level_table();
// The 8-bit integer layouts' packer (kernels/packed/), which the levels above keep.
WeightPacker int8_packer();

// GEMM (kernels/avx2/gemm_avx2.cpp): register tiles of weight rows x tokens.
GemmFloatKernel gemm_float;
GemmQ8Kernel gemm_q8;
// Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4 repacked at load into the shared layout
// (kernels/packed/q8_layout.h; kernels/avx2/gemm_q8_packed_avx2.cpp): gemm_q8 hands weights
// with TensorView::packed set here.
GemmQ8Kernel gemm_q8_packed;
// Q5_0, Q5_1, IQ4_NL and MXFP4 on the file's blocks (kernels/avx2/gemm_q32_avx2.cpp):
// gemm_q8 hands those types here when they are not packed (a 3-D or odd-shaped weight).
GemmQ8Kernel gemm_q32;
// K-quant row dot products (kernels/avx2/kquant_rows_avx2.cpp): every k-quant type, nullptr
// for any other; the scalar reference's bits.
KQuantRowDotFn kquant_row_dot(DType type);
// K-quant GEMM (the same file): packed Q4_K/Q6_K go to gemm_kquant_packed, other weights
// (Q5_K, Q8_K, or unpacked) row by row through kquant_row_dot.
GemmQ8KKernel gemm_q8k;
// Q4_K/Q6_K repacked at load into the shared layout (kernels/packed/kquant_layout.h;
// kernels/avx2/gemm_kquant_packed_avx2.cpp), bit-identical to the row kernels.
GemmQ8KKernel gemm_kquant_packed;

// Activation quantizers (kernels/avx2/quantize_avx2.cpp): the same bytes as the portable ones.
QuantizeQ8Kernel quantize_q8;
QuantizeQ8KKernel quantize_q8k;

// Row kernels (kernels/avx2/elementwise_avx2.cpp): SwiGLU with a vector exp; RMSNorm with its
// sum of squares in 4 x 8 float lanes, reduced in a fixed order (a row's bits depend only on the
// row); RoPE 4 pairs per vector, masked tails (nothing read or written past n / rope_dims).
SwigluKernel swiglu_row;
RmsnormKernel rmsnorm_row;
RopeKernel rope_apply;
// Gemma's tanh-based rows (kernels/avx2/geglu_avx2.cpp; contracts in kernels/geglu.h): GeGLU
// as x·sigmoid(2u) with the vector exp, soft-capping with a vector tanh; masked tails.
GegluKernel geglu_row;
SoftcapKernel softcap_row;
// gpt-oss's clamped SwiGLU (kernels/avx2/swiglu_oai_avx2.cpp; contract in kernels/swiglu_oai.h)
// with the vector exp; masked tails.
SwigluOaiKernel swiglu_oai_row;

// Attention (kernels/avx2/attention_avx2.cpp): attention_group for one token, and
// attention_tokens sharing each K/V row loaded among the tokens of a prefill block.
AttentionKernel attention_group;
AttentionTokensKernel attention_tokens;
// Stored K/V rows -> floats (kernels/avx2/kv_convert_avx2.cpp): F16 by F16C, BF16 by a shift,
// Q8_0/Q4_0 8 elements per vector times the block's scale; the same floats as dequantize_row.
ConvertKvRowsKernel convert_kv_rows;

// The f32 FMA loop of the instruction ceilings (kernels/avx2/instruction_peak_avx2.cpp).
InstructionLoop fma_f32_loop(int64_t iterations);
InstructionLoop dot_i8_loop(int64_t iterations);

}  // namespace tandem::avx2
