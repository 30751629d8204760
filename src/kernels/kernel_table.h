// The dispatch table: the matrix-product kernels of one instruction-set level. matmul()
// calls through kernel_table(), chosen once per process (cpu_features.h); tests call each
// level's table directly to hold it against the scalar reference.
#pragma once

#include <cstdint>

#include "base/tensor_view.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"

namespace tandem {

// out[t * out_stride + r] = dot(weight row r, activation row t) for r in [row_begin, row_end),
// t in [0, n_tokens). Each output element's arithmetic is the same whatever the row range or
// token count (batch invariance); kernels only choose how many rows/tokens share a pass.
using GemmFloatFn = void (*)(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x,
                             int64_t n_tokens, float* out, int64_t out_stride);
using GemmQ8Fn = void (*)(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                          int64_t n_tokens, float* out, int64_t out_stride);

// attention_group (kernels/attention.h) of one level.
using AttentionFn = void (*)(const float* queries, int64_t n_queries, const float* keys, const float* values,
                             int64_t kv_width, int64_t kv_offset, const int32_t* slots, int64_t n_ctx,
                             int64_t head_dim, float* scratch, float* out);

struct KernelTable {
  Isa isa;
  GemmFloatFn gemm_float;  // F32, F16, BF16 weights; activations f32
  GemmQ8Fn gemm_q8;        // Q8_0, Q4_0 weights; activations in 8-bit blocks
  AttentionFn attention;   // one KV head's group of query heads for one token
};

const KernelTable& kernel_table();         // the active level
const KernelTable& kernel_table(Isa isa);  // a given level (must be supported by the CPU)

namespace portable {
void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride);
void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
             int64_t n_tokens, float* out, int64_t out_stride);
void attention_group(const float* queries, int64_t n_queries, const float* keys, const float* values,
                     int64_t kv_width, int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                     float* scratch, float* out);
}  // namespace portable

namespace avx512 {
void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride);
void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
             int64_t n_tokens, float* out, int64_t out_stride);
void attention_group(const float* queries, int64_t n_queries, const float* keys, const float* values,
                     int64_t kv_width, int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                     float* scratch, float* out);
}  // namespace avx512

}  // namespace tandem
