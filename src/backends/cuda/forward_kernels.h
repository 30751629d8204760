// The small device kernels the CUDA forward pass needs between the big ones: the residual
// add, writing a batch's K/V rows into their cache slots (converted to the cache's type), and
// gathering the rows that want logits. All pointers are device memory; asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"

namespace tandem::cuda {

// rows[i] += delta[i] for i < n.
void add_in_place(float* rows, const float* delta, int64_t n, cudaStream_t stream);

// For t < n_tokens: the K row (rows + t * row_stride, width floats) and the V row right after
// it (rows + t * row_stride + width), converted to `type` (F32, or F16 rounded to nearest even
// as base/half.h's f32_to_f16), into keys and values + slots[t] * row_bytes: one launch for
// both caches.
void store_kv_rows(const float* rows, int64_t n_tokens, int64_t row_stride, int64_t width, const int32_t* slots,
                   DType type, uint8_t* keys, uint8_t* values, int64_t row_bytes, cudaStream_t stream);

// out[r] = rows[indices[r]] for r < n_out; rows of `width` floats.
void gather_rows(const float* rows, const int32_t* indices, int64_t n_out, int64_t width, float* out,
                 cudaStream_t stream);

}  // namespace tandem::cuda
