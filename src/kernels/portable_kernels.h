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
void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride);
void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride);
void quantize_q8(const float* x, int64_t n, ActivationBlockQ8* out);    // kernels/dot.cpp
void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out);  // kernels/dot_kquants.cpp
// The scalar reference row kernels (kernels/dot_kquants.cpp, dot_low_bit_kquants.cpp).
KQuantRowDotFn kquant_row_dot(DType type);
void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks, AttentionPartial* partials);
// Token by token through portable::attention_group.
void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap, const float* sinks, AttentionPartial* partials);
// Row by row through dequantize_row (kernels/attention.cpp).
void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out);
void swiglu_row(const float* gate, const float* up, int64_t n, float* out);  // kernels/elementwise.cpp
}  // namespace portable

}  // namespace tandem
