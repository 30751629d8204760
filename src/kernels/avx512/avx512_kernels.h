// The AVX-512 level's kernels that the table and other levels name (the rest are declared
// beside their contracts: elementwise.h, geglu.h, attention.h, gemm_packed.h): each needs a CPU
// with AVX-512 F/BW/VL/VNNI, the bf16 attention also AVX512_BF16.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem {

namespace avx512 {
void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride);
void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride);
// Q5_0, Q5_1, IQ4_NL, MXFP4 on the file's blocks (kernels/avx512/gemm_q32_avx512.cpp); gemm_q8
// hands those types here, at the AVX-512 and AMX levels.
void gemm_q32(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
              int64_t n_tokens, float* out, int64_t out_stride);
// K-quant row dot products (kernels/avx512/kquant_rows_avx512.cpp): every k-quant type, nullptr
// for any other; the scalar reference's bits. The AMX level's too.
KQuantRowDotFn kquant_row_dot(DType type);
void quantize_q8(const float* x, int64_t n, ActivationBlockQ8* out);    // kernels/avx512/quantize_avx512.cpp
void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out);  // the same file
void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks, AttentionPartial* partials);
void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out);
// attention_group and attention_tokens with bf16 dot products (kernels/avx512/
// attention_bf16_avx512.cpp): Q, K, the softmax weights and V rounded to bf16, accumulated in
// float. Need AVX512_BF16.
void attention_group_bf16(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                          int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                          float* out, float softcap, const float* sinks, AttentionPartial* partials);
void attention_tokens_bf16(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                           const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                           const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                           float softcap, const float* sinks, AttentionPartial* partials);
// The same with the scores in float (the f32 kernel's), only the weighted values in bf16.
void attention_group_bf16_values(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                                 int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                                 float* scratch, float* out, float softcap, const float* sinks,
                                 AttentionPartial* partials);
void attention_tokens_bf16_values(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                                  const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                                  const int32_t* slots, int64_t head_dim, float* scratch, float* out,
                                  int64_t out_stride, float softcap, const float* sinks, AttentionPartial* partials);
}  // namespace avx512

}  // namespace tandem
