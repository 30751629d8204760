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
void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride);
void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride);
// Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4 repacked at load into the shared layout
// (kernels/packed/q8_layout.h; kernels/avx2/gemm_q8_packed_avx2.cpp): gemm_q8 hands weights
// with TensorView::packed set here.
void gemm_q8_packed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                    int64_t n_tokens, float* out, int64_t out_stride);
// Q5_0, Q5_1, IQ4_NL and MXFP4 on the file's blocks (kernels/avx2/gemm_q32_avx2.cpp):
// gemm_q8 hands those types here when they are not packed (a 3-D or odd-shaped weight).
void gemm_q32(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
              int64_t n_tokens, float* out, int64_t out_stride);
// K-quant row dot products (kernels/avx2/kquant_rows_avx2.cpp): every k-quant type, nullptr
// for any other; the scalar reference's bits.
KQuantRowDotFn kquant_row_dot(DType type);
// K-quant GEMM (the same file): packed Q4_K/Q6_K go to gemm_kquant_packed, other weights
// (Q5_K, Q8_K, or unpacked) row by row through kquant_row_dot.
void gemm_q8k(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
              int64_t n_tokens, float* out, int64_t out_stride);
// Q4_K/Q6_K repacked at load into the shared layout (kernels/packed/kquant_layout.h;
// kernels/avx2/gemm_kquant_packed_avx2.cpp), bit-identical to the row kernels.
void gemm_kquant_packed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                        int64_t n_tokens, float* out, int64_t out_stride);

// Activation quantizers (kernels/avx2/quantize_avx2.cpp): the same bytes as the portable ones.
void quantize_q8(const float* x, int64_t n, ActivationBlockQ8* out);
void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out);

// Row kernels (kernels/avx2/elementwise_avx2.cpp): SwiGLU with a vector exp; RMSNorm with its
// sum of squares in 4 x 8 float lanes, reduced in a fixed order (a row's bits depend only on the
// row); RoPE 4 pairs per vector, masked tails (nothing read or written past n / rope_dims).
void swiglu_row(const float* gate, const float* up, int64_t n, float* out);
void rmsnorm_row(const float* x, const float* weight, int64_t n, float eps, float* out);
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos_table,
                const float* sin_table);
// Gemma's tanh-based rows (kernels/avx2/geglu_avx2.cpp; contracts in kernels/geglu.h): GeGLU
// as x·sigmoid(2u) with the vector exp, soft-capping with a vector tanh; masked tails.
void geglu_row(const float* gate, const float* up, int64_t n, float* out);
void softcap_row(const float* x, int64_t n, float cap, float* out);
// gpt-oss's clamped SwiGLU (kernels/avx2/swiglu_oai_avx2.cpp; contract in kernels/swiglu_oai.h)
// with the vector exp; masked tails.
void swiglu_oai_row(const float* gate, const float* up, int64_t n, float* out);

// Attention (kernels/avx2/attention_avx2.cpp): attention_group for one token, and
// attention_tokens sharing each K/V row loaded among the tokens of a prefill block.
void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks, AttentionPartial* partials);
void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap, const float* sinks, AttentionPartial* partials);
// Stored K/V rows -> floats (kernels/avx2/kv_convert_avx2.cpp): F16 by F16C, BF16 by a shift,
// Q8_0/Q4_0 8 elements per vector times the block's scale; the same floats as dequantize_row.
void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out);

// The f32 FMA loop of the instruction ceilings (kernels/avx2/instruction_peak_avx2.cpp).
InstructionLoop fma_f32_loop(int64_t iterations);

}  // namespace tandem::avx2
