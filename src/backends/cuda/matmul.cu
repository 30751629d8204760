// The block-format matmul kernel (matmul.h). Not tensor cores: a prefill GEMM on them
// (dequantise a tile to F16 in shared memory, then mma) is the next step and needs a device
// to tune and to hold to the same per-row invariance (README.md).
#include <cstdint>

#include "backends/cuda/block_dequant.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/matmul.h"

namespace tandem::cuda {
namespace {

constexpr int kMaxWarpsPerBlock = 4;

__device__ __forceinline__ float warp_sum(float value) {
  // The same butterfly for every output: lane l's partials meet in a fixed order.
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// One warp per weight row; the tokens in tiles of kTile held in registers. kTile = 1 is the
// decode GEMV (fewest registers); its per-token arithmetic is that of any other tile. The
// column loop is unrolled 8 deep so that several weight loads are in flight per warp before
// the first is used (decode is bound by the bytes waiting on memory); the sums keep its order.
// F32 weights and rows not whole groups of 8 take it (the group kernel below takes the rest).
// Launch bounds with one block a multiprocessor at least: without it ptxas held F32's tile of
// 16 to 72 registers and spilled.
template <DType type, int kTile>
__global__ void __launch_bounds__(kMaxWarpsPerBlock * 32, 1)
    matmul_kernel(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t n_rows, int64_t n_cols,
                  const float* __restrict__ x, int64_t n_tokens, float* __restrict__ out, int64_t out_stride,
                  bool accumulate) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= n_rows) return;  // whole warps leave together: the shuffles below stay full
  const uint8_t* weight_row = weight + row * row_bytes;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTile) {
    const int tile = static_cast<int>(n_tokens - t0 < kTile ? n_tokens - t0 : kTile);
    const float* x_tile = x + t0 * n_cols;
    float acc[kTile];
#pragma unroll
    for (int t = 0; t < kTile; ++t) acc[t] = 0.0f;
#pragma unroll 8
    for (int64_t c = lane; c < n_cols; c += 32) {
      const float w = dequant_element<type>(weight_row, c);
#pragma unroll
      for (int t = 0; t < kTile; ++t)
        if (t < tile) acc[t] = __fmaf_rn(w, x_tile[t * n_cols + c], acc[t]);
    }
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      if (t < tile) {
        const float sum = warp_sum(acc[t]);
        float* target = out + (t0 + t) * out_stride + row;
        if (lane == 0) *target = accumulate ? __fadd_rn(*target, sum) : sum;
      }
    }
  }
}

// Groups of 8 columns: F16/BF16 rows (16-byte aligned) and every block format. Lane l sums
// columns 8l..8l+7, then 256 further, and so on, by FMA in order, then the same butterfly;
// dequant_group (block_dequant.h) reads each group with one 16-byte load (F16/BF16) or a few
// 2- and 4-byte ones (a quarter of a Q8_0/Q4_0 block, an eighth of a Q4_K/Q6_K sub-block)
// instead of a byte or two per element, and the activations with two 16-byte loads per
// token, contiguous across the warp. The group loop is unrolled so that several groups' loads
// are in flight before the first is used; the sums keep their order. The choice of this
// kernel depends on the matrix alone (type, alignment), never on the batch.
// kSplit: Q8_0/Q4_0 in the split layout (DeviceMatrix::scales), 8 quants in one 8-byte load.
template <DType type, int kTile, bool kSplit>
__global__ void __launch_bounds__(kMaxWarpsPerBlock * 32)
    matmul_group_kernel(const uint8_t* __restrict__ weight, const uint16_t* __restrict__ scales, int64_t row_bytes,
                        int64_t n_rows, int64_t n_cols, const float* __restrict__ x, int64_t n_tokens,
                        float* __restrict__ out, int64_t out_stride, bool accumulate) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= n_rows) return;
  const uint8_t* weight_row = weight + row * row_bytes;
  const uint16_t* scale_row = kSplit ? scales + row * (n_cols / 32) : nullptr;
  const int64_t n_groups = n_cols / 8;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTile) {
    const int tile = static_cast<int>(n_tokens - t0 < kTile ? n_tokens - t0 : kTile);
    const float* x_tile = x + t0 * n_cols;
    float acc[kTile];
#pragma unroll
    for (int t = 0; t < kTile; ++t) acc[t] = 0.0f;
#pragma unroll(kTile == 1 ? 4 : 2)
    for (int64_t group = lane; group < n_groups; group += 32) {
      float w[8];
      if constexpr (kSplit)
        dequant_group_split<type>(weight_row, scale_row, group * 8, w);
      else
        dequant_group<type>(weight_row, group * 8, w);
      const int64_t c = group * 8;
#pragma unroll
      for (int t = 0; t < kTile; ++t) {
        if (t < tile) {
          // n_cols is a multiple of 8 and x 16-byte aligned (checked at launch).
          const float4 a = *reinterpret_cast<const float4*>(x_tile + t * n_cols + c);
          const float4 b = *reinterpret_cast<const float4*>(x_tile + t * n_cols + c + 4);
          const float xs[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[t] = __fmaf_rn(w[e], xs[e], acc[t]);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      if (t < tile) {
        const float sum = warp_sum(acc[t]);
        float* target = out + (t0 + t) * out_stride + row;
        if (lane == 0) *target = accumulate ? __fadd_rn(*target, sum) : sum;
      }
    }
  }
}

// The block formats always take the group kernel (their blocks are whole groups of 8, their
// rows 2-byte aligned, Q4_K's 4); F16/BF16 when their rows are 16-byte aligned; F32 never.
template <DType type>
bool takes_group_kernel(const DeviceMatrix& w) {
  const auto address = reinterpret_cast<uintptr_t>(w.data);
  if constexpr (type == DType::F16 || type == DType::BF16)
    return w.n_cols % 8 == 0 && w.row_bytes % 16 == 0 && address % 16 == 0;
  if constexpr (type == DType::Q4_K) return w.row_bytes % 4 == 0 && address % 4 == 0;
  if constexpr (type == DType::Q8_0 || type == DType::Q4_0 || type == DType::Q6_K)
    return w.row_bytes % 2 == 0 && address % 2 == 0;
  return false;
}

// Warps (rows) per thread block, a function of the matrix alone: small matrices (K/V
// projections: 256 rows for tinyllama) in blocks of one warp so that they spread over every
// multiprocessor instead of a third of them; a row's arithmetic is the same either way.
int warps_per_block(int64_t n_rows) { return n_rows >= 4096 ? kMaxWarpsPerBlock : 1; }

template <DType type, bool kSplit>
void launch_group(const DeviceMatrix& w, const float* x, int64_t n_tokens, float* out, int64_t out_stride,
                  bool accumulate, cudaStream_t stream) {
  const int warps = warps_per_block(w.n_rows);
  const dim3 grid(static_cast<unsigned>((w.n_rows + warps - 1) / warps));
  const unsigned threads = static_cast<unsigned>(warps * 32);
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  if (reinterpret_cast<uintptr_t>(x) % 16 != 0) throw CudaError("cuda::matmul: activations must be 16-byte aligned");
  if (n_tokens == 1)
    matmul_group_kernel<type, 1, kSplit><<<grid, threads, 0, stream>>>(bytes, w.scales, w.row_bytes, w.n_rows, w.n_cols,
                                                                       x, n_tokens, out, out_stride, accumulate);
  else
    matmul_group_kernel<type, kMatmulTokenTile, kSplit><<<grid, threads, 0, stream>>>(
        bytes, w.scales, w.row_bytes, w.n_rows, w.n_cols, x, n_tokens, out, out_stride, accumulate);
  TANDEM_CUDA_CHECK_LAUNCH();
}

template <DType type>
void launch(const DeviceMatrix& w, const float* x, int64_t n_tokens, float* out, int64_t out_stride, bool accumulate,
            cudaStream_t stream) {
  const int warps = warps_per_block(w.n_rows);
  const dim3 grid(static_cast<unsigned>((w.n_rows + warps - 1) / warps));
  const unsigned threads = static_cast<unsigned>(warps * 32);
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  if constexpr (cuda_split_layout(type)) {
    if (w.scales != nullptr) {
      launch_group<type, true>(w, x, n_tokens, out, out_stride, accumulate, stream);
      return;
    }
  }
  if constexpr (type != DType::F32) {
    if (takes_group_kernel<type>(w)) {
      launch_group<type, false>(w, x, n_tokens, out, out_stride, accumulate, stream);
      return;
    }
  }
  if (n_tokens == 1)
    matmul_kernel<type, 1><<<grid, threads, 0, stream>>>(bytes, w.row_bytes, w.n_rows, w.n_cols, x, n_tokens, out,
                                                         out_stride, accumulate);
  else
    matmul_kernel<type, kMatmulTokenTile><<<grid, threads, 0, stream>>>(bytes, w.row_bytes, w.n_rows, w.n_cols, x,
                                                                        n_tokens, out, out_stride, accumulate);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void matmul(const DeviceMatrix& weight, const float* x, int64_t n_tokens, float* out, cudaStream_t stream,
            bool accumulate, int64_t out_stride) {
  if (n_tokens == 0 || weight.n_rows == 0) return;
  if (out_stride == 0) out_stride = weight.n_rows;
  if (out_stride < weight.n_rows) throw CudaError("cuda::matmul: output rows overlap (stride below the row count)");
  if (weight.scales != nullptr && !cuda_split_layout(weight.type))
    throw CudaError("cuda::matmul: a split layout of " + std::string(dtype_name(weight.type)) +
                    " (only Q8_0 and Q4_0 have one)");
  if (!cuda_weight_type_supported(weight.type) || weight.n_cols % cuda_block_elements(weight.type) != 0)
    throw CudaError("cuda::matmul: weight type " + std::string(dtype_name(weight.type)) + " with " +
                    std::to_string(weight.n_cols) + " columns is not supported on the device");
  switch (weight.type) {
    case DType::F32: launch<DType::F32>(weight, x, n_tokens, out, out_stride, accumulate, stream); break;
    case DType::F16: launch<DType::F16>(weight, x, n_tokens, out, out_stride, accumulate, stream); break;
    case DType::BF16: launch<DType::BF16>(weight, x, n_tokens, out, out_stride, accumulate, stream); break;
    case DType::Q8_0: launch<DType::Q8_0>(weight, x, n_tokens, out, out_stride, accumulate, stream); break;
    case DType::Q4_0: launch<DType::Q4_0>(weight, x, n_tokens, out, out_stride, accumulate, stream); break;
    case DType::Q4_K: launch<DType::Q4_K>(weight, x, n_tokens, out, out_stride, accumulate, stream); break;
    case DType::Q6_K: launch<DType::Q6_K>(weight, x, n_tokens, out, out_stride, accumulate, stream); break;
    default: break;
  }
}

}  // namespace tandem::cuda
