// The warp-per-head paged attention kernel (warp_attention.h). One thread block per (token,
// KV head) as paged_attention.cu's, but each warp owns query heads of the group (warp w: heads
// w, w + 8) and keeps its online-softmax state in registers: per tile of 32 positions lane j
// scores position j (a dot over head_dim from shared memory, K rows padded one float so the
// lanes hit distinct banks), the tile's max and sum are fixed xor-butterflies, and lane l
// accumulates output elements l, l + 32, ... over the tile's positions in order. No thread
// waits on another's serial loop, so a block of a decode step finishes in a few hundred
// instructions a tile. Every reduction's order is fixed: a token's result depends on its own
// query, position and sequence alone.
#include <string>

#include "backends/cuda/attention_dispatch.h"
#include "backends/cuda/block_dequant.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/warp_attention.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;  // positions a tile: one a lane
constexpr int kMaxHeadsPerWarp = static_cast<int>((kMaxAttentionGroup + kWarps - 1) / kWarps);
constexpr int kMaxDimsPerLane = static_cast<int>(kMaxAttentionHeadDim / 32);

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value = __fadd_rn(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

int64_t shared_floats(int64_t group, int64_t head_dim) {
  return group * head_dim + kTile * (head_dim + 1) + kTile * head_dim;  // q, K (padded rows), V
}

template <DType type>
__global__ void __launch_bounds__(kThreads)
    warp_attention_kernel(const float* __restrict__ queries, int64_t q_stride, int group, int head_dim,
                          const int32_t* __restrict__ positions, const int32_t* __restrict__ seq_ids, PagedKv kv,
                          float* __restrict__ out, int64_t out_stride) {
  extern __shared__ float shared[];
  const int k_stride = head_dim + 1;
  float* q_s = shared;
  float* k_s = q_s + group * head_dim;
  float* v_s = k_s + kTile * k_stride;

  const int64_t t = blockIdx.x, kv_head = blockIdx.y;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int64_t n_ctx = static_cast<int64_t>(positions[t]) + 1;
  const int32_t* table = kv.block_tables + static_cast<int64_t>(seq_ids[t]) * kv.max_blocks;
  const float* q_group = queries + t * q_stride + kv_head * group * head_dim;
  const int64_t head_offset = kv_head * head_dim;  // elements into a K/V row
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));
  for (int i = tid; i < group * head_dim; i += kThreads) q_s[i] = q_group[i];

  float running_max[kMaxHeadsPerWarp], running_sum[kMaxHeadsPerWarp], acc[kMaxHeadsPerWarp][kMaxDimsPerLane];
#pragma unroll
  for (int h = 0; h < kMaxHeadsPerWarp; ++h) {
    running_max[h] = -INFINITY;
    running_sum[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < kMaxDimsPerLane; ++e) acc[h][e] = 0.0f;
  }

  for (int64_t p0 = 0; p0 < n_ctx; p0 += kTile) {
    const int len = static_cast<int>(n_ctx - p0 < kTile ? n_ctx - p0 : kTile);
    __syncthreads();  // the previous tile is consumed (and, the first time, q_s is written)
    for (int i = tid; i < len * head_dim; i += kThreads) {
      const int j = i / head_dim, d = i % head_dim;
      const int64_t p = p0 + j;
      const int64_t slot = static_cast<int64_t>(table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
      k_s[j * k_stride + d] = dequant_element<type>(kv.keys + slot * kv.key_row_bytes, head_offset + d);
      v_s[j * head_dim + d] = dequant_element<type>(kv.values + slot * kv.value_row_bytes, head_offset + d);
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < kMaxHeadsPerWarp; ++h) {
      const int head = warp + h * kWarps;
      if (head >= group) break;  // the same for the whole warp
      const float* q = q_s + head * head_dim;
      float score = -INFINITY;
      if (lane < len) {
        const float* k = k_s + lane * k_stride;
        float dot = 0.0f;
        for (int d = 0; d < head_dim; ++d) dot = __fmaf_rn(q[d], k[d], dot);
        score = __fmul_rn(dot, scale);
      }
      const float new_max = fmaxf(running_max[h], warp_max(score));
      const float correction = expf(running_max[h] - new_max);  // 0 on the first tile (max -inf)
      const float probability = lane < len ? expf(score - new_max) : 0.0f;
      running_sum[h] = __fadd_rn(__fmul_rn(running_sum[h], correction), warp_sum(probability));
      running_max[h] = new_max;
#pragma unroll
      for (int e = 0; e < kMaxDimsPerLane; ++e) {
        // Every lane takes part in each shuffle (a lane that left the loop would make the
        // full-mask __shfl_sync undefined, and it hangs when head_dim < 32): the break depends
        // only on e, and lanes past head_dim read no V and keep no result.
        if (32 * e >= head_dim) break;
        const int d = lane + 32 * e;
        const bool in_head = d < head_dim;
        float value = __fmul_rn(acc[h][e], correction);
        for (int j = 0; j < len; ++j) {
          const float p_j = __shfl_sync(0xffffffffu, probability, j);
          if (in_head) value = __fmaf_rn(p_j, v_s[j * head_dim + d], value);
        }
        acc[h][e] = value;
      }
    }
  }
#pragma unroll
  for (int h = 0; h < kMaxHeadsPerWarp; ++h) {
    const int head = warp + h * kWarps;
    if (head >= group) break;
    float* out_head = out + t * out_stride + (kv_head * group + head) * head_dim;
#pragma unroll
    for (int e = 0; e < kMaxDimsPerLane; ++e) {
      const int d = lane + 32 * e;
      if (d < head_dim) out_head[d] = __fdiv_rn(acc[h][e], running_sum[h]);
    }
  }
}

template <DType type>
void launch(const float* queries, int64_t q_stride, int64_t n_tokens, int64_t n_kv_heads, int64_t group,
            int64_t head_dim, const int32_t* positions, const int32_t* seq_ids, const PagedKv& kv, float* out,
            int64_t out_stride, cudaStream_t stream) {
  const size_t shared_bytes = static_cast<size_t>(shared_floats(group, head_dim)) * sizeof(float);
  // Past 48 KiB a kernel must opt in to more shared memory (head_dim 256 with large groups).
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(warp_attention_kernel<type>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared_bytes)));
  const dim3 grid(static_cast<unsigned>(n_tokens), static_cast<unsigned>(n_kv_heads));
  warp_attention_kernel<type><<<grid, kThreads, shared_bytes, stream>>>(
      queries, q_stride, static_cast<int>(group), static_cast<int>(head_dim), positions, seq_ids, kv, out, out_stride);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void warp_paged_attention(const float* queries, int64_t q_stride, int64_t n_tokens, int64_t n_heads, int64_t n_kv_heads,
                          int64_t head_dim, const int32_t* positions, const int32_t* seq_ids, const PagedKv& kv,
                          float* out, int64_t out_stride, cudaStream_t stream) {
  if (n_tokens == 0) return;
  const int64_t group = checked_attention_group("cuda::warp_paged_attention", n_heads, n_kv_heads, head_dim, kv);
  with_attention_kv_type("cuda::warp_paged_attention", kv.type, [&]<DType type>() {
    launch<type>(queries, q_stride, n_tokens, n_kv_heads, group, head_dim, positions, seq_ids, kv, out, out_stride,
                 stream);
  });
}

}  // namespace tandem::cuda
