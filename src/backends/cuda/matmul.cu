// The block-format matmul kernel (matmul.h). Not tensor cores: a prefill GEMM on them
// (dequantise a tile to F16 in shared memory, then mma) is the next step and needs a device
// to tune and to hold to the same per-row invariance (README.md).
#include <cstdint>

#include "backends/cuda/block_dequant.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/matmul.h"

namespace tandem::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

__device__ __forceinline__ float warp_sum(float value) {
  // The same butterfly for every output: lane l's partials meet in a fixed order.
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// One warp per weight row; the tokens in tiles of kTile held in registers. kTile = 1 is the
// decode GEMV (fewest registers); its per-token arithmetic is that of any other tile. The
// column loop is unrolled 8 deep so that several weight loads are in flight per warp before
// the first is used (decode is bound by the bytes waiting on memory); the sums keep its order.
template <DType type, int kTile>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    matmul_kernel(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t n_rows, int64_t n_cols,
                  const float* __restrict__ x, int64_t n_tokens, float* __restrict__ out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
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
        if (lane == 0) out[(t0 + t) * n_rows + row] = sum;
      }
    }
  }
}

// F16 and BF16 rows of whole 256-column groups: each lane reads 16 bytes (8 columns) per load
// instead of 2, a quarter of the load instructions for the same bytes, so far more bytes wait
// on memory per warp at decode. Lane l sums columns 8l..8l+7, then 256 further, in order, then
// the same butterfly; the choice of this kernel depends on the matrix alone (type, width,
// alignment), never on the batch.
template <DType type, int kTile>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    matmul_wide_kernel(const uint8_t* __restrict__ weight, int64_t row_bytes, int64_t n_rows, int64_t n_cols,
                       const float* __restrict__ x, int64_t n_tokens, float* __restrict__ out) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= n_rows) return;
  const uint4* weight_row = reinterpret_cast<const uint4*>(weight + row * row_bytes);
  const int64_t n_groups = n_cols / 8;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += kTile) {
    const int tile = static_cast<int>(n_tokens - t0 < kTile ? n_tokens - t0 : kTile);
    const float* x_tile = x + t0 * n_cols;
    float acc[kTile];
#pragma unroll
    for (int t = 0; t < kTile; ++t) acc[t] = 0.0f;
#pragma unroll 2
    for (int64_t group = lane; group < n_groups; group += 32) {
      const uint4 packed = weight_row[group];
      const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
      float w[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // little-endian: column 2i in the low half of word i
        const auto low = static_cast<uint16_t>(words[i] & 0xffffu), high = static_cast<uint16_t>(words[i] >> 16);
        w[2 * i] = type == DType::F16 ? f16_bits_to_float(low) : bf16_bits_to_float(low);
        w[2 * i + 1] = type == DType::F16 ? f16_bits_to_float(high) : bf16_bits_to_float(high);
      }
      const int64_t c = group * 8;
#pragma unroll
      for (int t = 0; t < kTile; ++t) {
        if (t < tile) {
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[t] = __fmaf_rn(w[e], x_tile[t * n_cols + c + e], acc[t]);
        }
      }
    }
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      if (t < tile) {
        const float sum = warp_sum(acc[t]);
        if (lane == 0) out[(t0 + t) * n_rows + row] = sum;
      }
    }
  }
}

template <DType type>
bool takes_wide_kernel(const DeviceMatrix& w) {
  return (type == DType::F16 || type == DType::BF16) && w.n_cols % 256 == 0 && w.row_bytes % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

template <DType type>
void launch(const DeviceMatrix& w, const float* x, int64_t n_tokens, float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((w.n_rows + kWarpsPerBlock - 1) / kWarpsPerBlock));
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  if constexpr (type == DType::F16 || type == DType::BF16) {
    if (takes_wide_kernel<type>(w)) {
      if (n_tokens == 1)
        matmul_wide_kernel<type, 1>
            <<<grid, kWarpsPerBlock * 32, 0, stream>>>(bytes, w.row_bytes, w.n_rows, w.n_cols, x, n_tokens, out);
      else
        matmul_wide_kernel<type, kMatmulTokenTile>
            <<<grid, kWarpsPerBlock * 32, 0, stream>>>(bytes, w.row_bytes, w.n_rows, w.n_cols, x, n_tokens, out);
      TANDEM_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  if (n_tokens == 1)
    matmul_kernel<type, 1>
        <<<grid, kWarpsPerBlock * 32, 0, stream>>>(bytes, w.row_bytes, w.n_rows, w.n_cols, x, n_tokens, out);
  else
    matmul_kernel<type, kMatmulTokenTile>
        <<<grid, kWarpsPerBlock * 32, 0, stream>>>(bytes, w.row_bytes, w.n_rows, w.n_cols, x, n_tokens, out);
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void matmul(const DeviceMatrix& weight, const float* x, int64_t n_tokens, float* out, cudaStream_t stream) {
  if (n_tokens == 0 || weight.n_rows == 0) return;
  if (!cuda_weight_type_supported(weight.type) || weight.n_cols % cuda_block_elements(weight.type) != 0)
    throw CudaError("cuda::matmul: weight type " + std::string(dtype_name(weight.type)) + " with " +
                    std::to_string(weight.n_cols) + " columns is not supported on the device");
  switch (weight.type) {
    case DType::F32: launch<DType::F32>(weight, x, n_tokens, out, stream); break;
    case DType::F16: launch<DType::F16>(weight, x, n_tokens, out, stream); break;
    case DType::BF16: launch<DType::BF16>(weight, x, n_tokens, out, stream); break;
    case DType::Q8_0: launch<DType::Q8_0>(weight, x, n_tokens, out, stream); break;
    case DType::Q4_0: launch<DType::Q4_0>(weight, x, n_tokens, out, stream); break;
    case DType::Q4_K: launch<DType::Q4_K>(weight, x, n_tokens, out, stream); break;
    case DType::Q6_K: launch<DType::Q6_K>(weight, x, n_tokens, out, stream); break;
    default: break;
  }
}

}  // namespace tandem::cuda
