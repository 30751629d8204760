// Paged attention with a warp per query head (warp_attention.cu): the contract of
// paged_attention.h's paged_attention (the same arguments, block tables, scale, causal range
// and batch invariance), its softmax state in registers instead of one thread's serial loop
// over each tile — the kernel paged_attention() runs unless TANDEM_CUDA_ATTENTION=tile.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/paged_attention.h"

namespace tandem::cuda {

void warp_paged_attention(const float* queries, int64_t q_stride, int64_t n_tokens, int64_t n_heads, int64_t n_kv_heads,
                          int64_t head_dim, const int32_t* positions, const int32_t* seq_ids, const PagedKv& kv,
                          float* out, int64_t out_stride, cudaStream_t stream);

}  // namespace tandem::cuda
