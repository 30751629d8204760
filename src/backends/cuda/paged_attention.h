// Causal attention on the device over a paged KV cache: K/V rows are found through each
// sequence's block table exactly as the CPU path finds them (kv/kv_cache.h slot():
// block_table[p / block_size] * block_size + p % block_size), stored in the cache's type
// (F32, F16, BF16, Q8_0, Q4_0; block_dequant.h). One thread block per (token, KV head): the
// group of query heads sharing that KV head (GQA) is computed together, so each K/V row is
// read once for the group; positions in tiles of kAttentionTileCuda with an online softmax.
// A token's result depends only on its own query, position and sequence (batch invariance).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"

namespace tandem::cuda {

constexpr int64_t kAttentionTileCuda = 32;
constexpr int64_t kMaxAttentionHeadDim = 256;
constexpr int64_t kMaxAttentionGroup = 16;

// One layer's K and V rows in device memory ([n_slots, row_bytes], the kv heads one after
// another, head h's elements from h * head_dim; F16 rows 2-byte aligned, F32 rows 4) and the
// batch's block tables.
struct PagedKv {
  const uint8_t* keys = nullptr;
  const uint8_t* values = nullptr;
  int64_t key_row_bytes = 0;
  int64_t value_row_bytes = 0;
  DType type = DType::F16;  // K and V alike
  int32_t block_size = 0;
  const int32_t* block_tables = nullptr;  // [n_sequences, max_blocks] device memory
  int64_t max_blocks = 0;
};

// queries: [n_tokens, q_stride] (query head h at h * head_dim); out: [n_tokens, out_stride]
// likewise; positions, seq_ids: [n_tokens] device memory; token t sees positions
// 0..positions[t] of sequence seq_ids[t]. Query head h reads KV head h / (n_heads / n_kv_heads).
// Scores scaled by 1/sqrt(head_dim). Throws CudaError for shapes or types it does not take.
void paged_attention(const float* queries, int64_t q_stride, int64_t n_tokens, int64_t n_heads, int64_t n_kv_heads,
                     int64_t head_dim, const int32_t* positions, const int32_t* seq_ids, const PagedKv& kv, float* out,
                     int64_t out_stride, cudaStream_t stream);

}  // namespace tandem::cuda
