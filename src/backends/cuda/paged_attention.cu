// The paged attention kernel (paged_attention.h). Per tile of positions: the group's K and V
// rows are dequantised into shared memory, one warp per (query head, position) score, then
// one warp per query head updates its running max and (lane 0) sum in position order, and
// the threads over (query head, element) rescale and accumulate V. Every reduction runs in a
// fixed order.
#include <cstdlib>
#include <string>

#include "backends/cuda/attention_dispatch.h"
#include "backends/cuda/block_dequant.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/paged_attention.h"
#include "backends/cuda/warp_attention.h"

namespace tandem::cuda {
namespace {

// Every thread count gives the same bits (each score is one warp's fixed reduction, each output
// element one thread's loop); 256 spreads a decode step's few blocks (one per KV head) wider.
constexpr int kThreads = 256;
constexpr int kTile = static_cast<int>(kAttentionTileCuda);

struct SharedLayout {
  int64_t q, k, v, acc, probs, corr, max, sum, total_floats;
};

__host__ __device__ inline SharedLayout shared_layout(int64_t group, int64_t head_dim) {
  SharedLayout s{};
  s.q = 0;
  s.k = s.q + group * head_dim;
  s.v = s.k + kTile * head_dim;
  s.acc = s.v + kTile * head_dim;
  s.probs = s.acc + group * head_dim;
  s.corr = s.probs + group * kTile;
  s.max = s.corr + group;
  s.sum = s.max + group;
  s.total_floats = s.sum + group;
  return s;
}

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// One K/V element: F16 and F32 rows are naturally aligned, so one 2- or 4-byte load (the
// same value as dequant_element's byte loads); the block formats through dequant_element.
template <DType type>
__device__ __forceinline__ float kv_element(const uint8_t* row, int64_t k) {
  if constexpr (type == DType::F16) return f16_bits_to_float(load_aligned<uint16_t>(row + 2 * k));
  if constexpr (type == DType::F32) return float_from_bits(load_aligned<uint32_t>(row + 4 * k));
  return dequant_element<type>(row, k);
}

template <DType type>
__global__ void __launch_bounds__(kThreads)
    paged_attention_kernel(const float* queries, int64_t q_stride, int64_t group, int64_t head_dim,
                           const int32_t* positions, const int32_t* seq_ids, PagedKv kv, float* out,
                           int64_t out_stride) {
  extern __shared__ float shared[];
  const SharedLayout layout = shared_layout(group, head_dim);
  float* q_s = shared + layout.q;
  float* k_s = shared + layout.k;
  float* v_s = shared + layout.v;
  float* acc = shared + layout.acc;
  float* probs = shared + layout.probs;
  float* corr = shared + layout.corr;
  float* running_max = shared + layout.max;
  float* running_sum = shared + layout.sum;

  const int64_t t = blockIdx.x, kv_head = blockIdx.y;
  const int tid = static_cast<int>(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const int n_warps = kThreads / 32;
  const int64_t n_ctx = static_cast<int64_t>(positions[t]) + 1;
  const int32_t* table = kv.block_tables + static_cast<int64_t>(seq_ids[t]) * kv.max_blocks;
  const float* q_group = queries + t * q_stride + kv_head * group * head_dim;
  const int64_t group_elements = group * head_dim;
  const int64_t head_offset = kv_head * head_dim;  // elements into a K/V row
  const float scale = 1.0f / sqrtf(static_cast<float>(head_dim));

  for (int64_t i = tid; i < group_elements; i += kThreads) {
    q_s[i] = q_group[i];
    acc[i] = 0.0f;
  }
  if (tid < group) {
    running_max[tid] = -INFINITY;
    running_sum[tid] = 0.0f;
  }
  __syncthreads();

  for (int64_t p0 = 0; p0 < n_ctx; p0 += kTile) {
    const int len = static_cast<int>(n_ctx - p0 < kTile ? n_ctx - p0 : kTile);
    for (int64_t i = tid; i < len * head_dim; i += kThreads) {
      const int64_t p = p0 + i / head_dim, d = i % head_dim;
      const int64_t slot = static_cast<int64_t>(table[p / kv.block_size]) * kv.block_size + p % kv.block_size;
      k_s[i] = kv_element<type>(kv.keys + slot * kv.key_row_bytes, head_offset + d);
      v_s[i] = kv_element<type>(kv.values + slot * kv.value_row_bytes, head_offset + d);
    }
    __syncthreads();
    for (int pair = warp; pair < group * len; pair += n_warps) {
      const int g = pair / len, j = pair % len;
      float dot = 0.0f;
      for (int64_t d = lane; d < head_dim; d += 32) dot = __fmaf_rn(q_s[g * head_dim + d], k_s[j * head_dim + d], dot);
      dot = warp_sum(dot);
      if (lane == 0) probs[g * kTile + j] = __fmul_rn(dot, scale);
    }
    __syncthreads();
    // A warp per query head: the tile's max across the lanes (fmaxf is exact, so any order
    // gives the max a loop would), the exponentials one a lane, then lane 0 sums them in
    // position order: the bits of one thread doing it all, without its 32 serial expf.
    for (int g = warp; g < group; g += n_warps) {
      float* row = probs + g * kTile;
      const float old_max = running_max[g];
      const float score = lane < len ? row[lane] : -INFINITY;
      float tile_max = score;
      for (int offset = 16; offset > 0; offset /= 2)
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      const float new_max = fmaxf(old_max, tile_max);
      if (lane < len) row[lane] = expf(score - new_max);
      __syncwarp();
      if (lane == 0) {
        const float correction = expf(old_max - new_max);  // 0 on the first tile (old_max = -inf)
        float sum = __fmul_rn(running_sum[g], correction);
        for (int j = 0; j < len; ++j) sum = __fadd_rn(sum, row[j]);
        running_max[g] = new_max;
        running_sum[g] = sum;
        corr[g] = correction;
      }
    }
    __syncthreads();
    for (int64_t i = tid; i < group_elements; i += kThreads) {
      const int64_t g = i / head_dim, d = i % head_dim;
      float value = __fmul_rn(acc[i], corr[g]);
      for (int j = 0; j < len; ++j) value = __fmaf_rn(probs[g * kTile + j], v_s[j * head_dim + d], value);
      acc[i] = value;
    }
    __syncthreads();
  }
  float* out_group = out + t * out_stride + kv_head * group * head_dim;
  for (int64_t i = tid; i < group_elements; i += kThreads) out_group[i] = __fdiv_rn(acc[i], running_sum[i / head_dim]);
}

template <DType type>
void launch(const float* queries, int64_t q_stride, int64_t n_tokens, int64_t n_kv_heads, int64_t group,
            int64_t head_dim, const int32_t* positions, const int32_t* seq_ids, const PagedKv& kv, float* out,
            int64_t out_stride, cudaStream_t stream) {
  const size_t shared_bytes = static_cast<size_t>(shared_layout(group, head_dim).total_floats) * sizeof(float);
  // Past 48 KiB a kernel must opt in to more shared memory (head_dim 256 with large groups).
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(paged_attention_kernel<type>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(shared_bytes)));
  const dim3 grid(static_cast<unsigned>(n_tokens), static_cast<unsigned>(n_kv_heads));
  paged_attention_kernel<type><<<grid, kThreads, shared_bytes, stream>>>(queries, q_stride, group, head_dim, positions,
                                                                         seq_ids, kv, out, out_stride);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void paged_attention(const float* queries, int64_t q_stride, int64_t n_tokens, int64_t n_heads, int64_t n_kv_heads,
                     int64_t head_dim, const int32_t* positions, const int32_t* seq_ids, const PagedKv& kv, float* out,
                     int64_t out_stride, cudaStream_t stream) {
  if (n_tokens == 0) return;
  // The warp-per-head kernel (warp_attention.h) unless TANDEM_CUDA_ATTENTION=tile asks for this
  // file's: one choice per process, never per batch.
  static const bool tile_kernel = [] {
    const char* choice = std::getenv("TANDEM_CUDA_ATTENTION");
    return choice != nullptr && std::string(choice) == "tile";
  }();
  if (!tile_kernel) {
    warp_paged_attention(queries, q_stride, n_tokens, n_heads, n_kv_heads, head_dim, positions, seq_ids, kv, out,
                         out_stride, stream);
    return;
  }
  const int64_t group = checked_attention_group("cuda::paged_attention", n_heads, n_kv_heads, head_dim, kv);
  with_attention_kv_type("cuda::paged_attention", kv.type, [&]<DType type>() {
    launch<type>(queries, q_stride, n_tokens, n_kv_heads, group, head_dim, positions, seq_ids, kv, out, out_stride,
                 stream);
  });
}

}  // namespace tandem::cuda
