// The tensor-core matmul (matmul_f16_mma.h), F16 and Q8_0 weights. One thread block per 16-row weight tile and
// group of token tiles: its 8 warps each walk one contiguous range of the column tiles
// (kMmaSplits ranges, fixed by n_cols), loading a whole 16x16 weight tile per step as 16
// contiguous bytes a lane (the repacked layout), and issue one mma per token tile held; the 8
// partial tiles meet in shared memory and are added in range order. At decode (one token
// tile) every block streams its rows' weights once, 8 warps deep; at prefill a block holds 8
// token tiles (64 tokens) so each weight tile loaded feeds 8 mma. Q8_0: a step is a 32-column
// block, its int8 quants turned into exact f16 in registers, two mma into a block sum that the
// row's scale then adds into the running sum.
#include <cuda_fp16.h>

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/f16_mma_layout.h"
#include "backends/cuda/matmul_f16_mma.h"
#include "backends/cuda/rmsnorm_scale.h"

namespace tandem::cuda {
namespace {

constexpr int kThreads = kMmaSplits * 32;

__global__ void pack_activations_kernel(const float* __restrict__ x, int64_t n_tokens, int64_t n_cols,
                                        int64_t col_tiles, int64_t n_lanes, uint2* __restrict__ packed) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_lanes) return;
  const int lane = static_cast<int>(i % 32);
  const int64_t tile = i / 32;
  const int64_t col_tile = tile % col_tiles, token_tile = tile / col_tiles;
  const int64_t token = token_tile * kMmaTokens + lane / 4;
  uint32_t halves[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t col = col_tile * kMmaCols + 2 * (lane % 4) + j % 2 + 8 * (j / 2);
    const float value = token < n_tokens ? x[token * n_cols + col] : 0.0f;
    halves[j] = __half_as_ushort(__float2half_rn(value));
  }
  packed[i] = make_uint2(halves[0] | (halves[1] << 16), halves[2] | (halves[3] << 16));
}

__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint4& a, const uint2& b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b.x), "r"(b.y));
}

// int8 quants b0, b1 of `word` (bytes `low`, low + 1) as an f16 pair, exactly: biased to
// 128 + q in a half's low mantissa bits over 1024 (0x6400), then 1152 taken off.
__device__ __forceinline__ uint32_t int8_pair_to_f16x2(uint32_t word, uint32_t selector) {
  const uint32_t biased = __byte_perm(word ^ 0x80808080u, 0x64646464u, selector);
  const __half2 value = __hsub2(*reinterpret_cast<const __half2*>(&biased), __half2half2(__ushort_as_half(0x6480)));
  return *reinterpret_cast<const uint32_t*>(&value);
}

enum class Weights { F16, Q8_0 };

// Where activation (token, column) of rows n_cols wide lies in the packed layout (halves).
__device__ __forceinline__ int64_t packed_index(int64_t token, int64_t column, int64_t n_cols) {
  const int64_t c = column % kMmaCols;
  const int lane = static_cast<int>(token % kMmaTokens) * 4 + static_cast<int>(c % 8) / 2;
  const int half = static_cast<int>(c % 2 + 2 * (c / 8));
  return ((token / kMmaTokens * (n_cols / kMmaCols) + column / kMmaCols) * 32 + lane) * 4 + half;
}

// The A fragment of one step for row tile `tile` (kRowTiles apart in the packed weights):
// F16's tile as loaded; Q8_0's two 16-column halves made f16, with the rows' two scales.
template <Weights kWeights>
struct StepWeights {
  uint4 first, second;
  float scale_low = 1.0f, scale_high = 1.0f;
};

template <Weights kWeights>
__device__ __forceinline__ StepWeights<kWeights> load_step(const uint4* a, const __half* scales, int64_t k) {
  StepWeights<kWeights> w;
  const uint4 packed = __ldg(a + k * 32);
  if constexpr (kWeights == Weights::F16) {
    w.first = packed;
  } else {
    w.scale_low = __half2float(scales[k * kMmaRows]);
    w.scale_high = __half2float(scales[k * kMmaRows + 8]);
    w.first = make_uint4(int8_pair_to_f16x2(packed.x, 0x4140), int8_pair_to_f16x2(packed.x, 0x4342),
                         int8_pair_to_f16x2(packed.y, 0x4140), int8_pair_to_f16x2(packed.y, 0x4342));
    w.second = make_uint4(int8_pair_to_f16x2(packed.z, 0x4140), int8_pair_to_f16x2(packed.z, 0x4342),
                          int8_pair_to_f16x2(packed.w, 0x4140), int8_pair_to_f16x2(packed.w, 0x4342));
  }
  return w;
}

// acc += the step's product for one token tile: F16 one mma; Q8_0 the block's q . x by two
// mma from zero, then scaled by its row's d into the running sum.
template <Weights kWeights>
__device__ __forceinline__ void step_product(float (&acc)[4], const StepWeights<kWeights>& w, const uint2* b,
                                             int64_t k) {
  if constexpr (kWeights == Weights::F16) {
    mma_m16n8k16(acc, w.first, __ldg(b + k * 32));
  } else {
    float block[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma_m16n8k16(block, w.first, __ldg(b + 2 * k * 32));
    mma_m16n8k16(block, w.second, __ldg(b + (2 * k + 1) * 32));
    acc[0] = __fmaf_rn(w.scale_low, block[0], acc[0]);
    acc[1] = __fmaf_rn(w.scale_low, block[1], acc[1]);
    acc[2] = __fmaf_rn(w.scale_high, block[2], acc[2]);
    acc[3] = __fmaf_rn(w.scale_high, block[3], acc[3]);
  }
}

// A block: kRowTiles row tiles x kTokenTiles token tiles; warp w walks step range w of each
// (a step: a 16-column tile for F16, a 32-column block for Q8_0). Every element's arithmetic
// is the same whatever kRowTiles and kTokenTiles are: they only group elements.
template <Weights kWeights, int kTokenTiles, int kRowTiles>
__global__ void __launch_bounds__(kThreads)
    mma_kernel(const uint8_t* __restrict__ weights, const __half* __restrict__ all_scales, int64_t n_rows,
               int64_t col_tiles, const uint2* __restrict__ packed_x, int64_t token_tiles, int64_t n_tokens,
               MmaEpilogue epilogue) {
  __shared__ float4 partial[kMmaSplits][kTokenTiles][32];
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t first_row_tile = static_cast<int64_t>(blockIdx.x) * kRowTiles;
  const int64_t first_token_tile = static_cast<int64_t>(blockIdx.y) * kTokenTiles;
  const int held =
      static_cast<int>(token_tiles - first_token_tile < kTokenTiles ? token_tiles - first_token_tile : kTokenTiles);
  constexpr int kTilesPerStep = kWeights == Weights::F16 ? 1 : 2;
  const int64_t steps = col_tiles / kTilesPerStep;
  // This warp's steps: range `warp` of kMmaSplits, a function of n_cols alone.
  const int64_t begin = steps * warp / kMmaSplits, end = steps * (warp + 1) / kMmaSplits;
  float acc[kRowTiles][kTokenTiles][4];
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r)
#pragma unroll
    for (int t = 0; t < kTokenTiles; ++t) acc[r][t][0] = acc[r][t][1] = acc[r][t][2] = acc[r][t][3] = 0.0f;
  const uint4* a = reinterpret_cast<const uint4*>(weights) + (first_row_tile * steps) * 32 + lane;
  const uint2* b = packed_x + (first_token_tile * col_tiles) * 32 + lane;
  const __half* scales = all_scales + first_row_tile * steps * kMmaRows + lane / 4;  // Q8_0: rows g and g + 8
#pragma unroll(kRowTiles* kTokenTiles > 8 ? 1 : 4)
  for (int64_t k = begin; k < end; ++k) {
    StepWeights<kWeights> w[kRowTiles];
#pragma unroll
    for (int r = 0; r < kRowTiles; ++r)
      w[r] = load_step<kWeights>(a + r * steps * 32, scales + r * steps * kMmaRows, k);
#pragma unroll
    for (int t = 0; t < kTokenTiles; ++t)
      if (t < held) {
#pragma unroll
        for (int r = 0; r < kRowTiles; ++r) step_product<kWeights>(acc[r][t], w[r], b + t * col_tiles * 32, k);
      }
  }
  const float* sums = reinterpret_cast<const float*>(partial);
  constexpr int kTileFloats = 32 * 4;  // one warp's partial of one token tile
  // Element `within` of token tile t: its 8 range partials, added in range order.
  const auto total = [&](int t, int within) {
    float sum = sums[t * kTileFloats + within];  // range 0
#pragma unroll
    for (int w = 1; w < kMmaSplits; ++w) sum = __fadd_rn(sum, sums[(w * kTokenTiles + t) * kTileFloats + within]);
    return sum;
  };
#pragma unroll
  for (int r = 0; r < kRowTiles; ++r) {
    const int64_t row_tile = first_row_tile + r;
    if (r > 0) __syncthreads();  // the previous row tile's sums are read
#pragma unroll
    for (int t = 0; t < kTokenTiles; ++t)
      if (t < held) partial[warp][t][lane] = make_float4(acc[r][t][0], acc[r][t][1], acc[r][t][2], acc[r][t][3]);
    __syncthreads();
    if (epilogue.mode == MmaOutput::SwiGluPacked) {
      // Rows g (gate) and g + 8 (up) of this tile are one output column: elements 0, 1 and 2, 3.
      for (int e = static_cast<int>(threadIdx.x); e < held * kTileFloats / 2; e += kThreads) {
        const int t = e / (kTileFloats / 2), owner = e % (kTileFloats / 2) / 2, element = e % 2;
        const float gate = total(t, owner * 4 + element), up = total(t, owner * 4 + element + 2);
        const float product = __fmul_rn(__fdiv_rn(gate, __fadd_rn(1.0f, expf(-gate))), up);
        const int64_t column = row_tile * 8 + owner / 4;
        const int64_t token = (first_token_tile + t) * kMmaTokens + 2 * (owner % 4) + element;
        if (token < n_tokens)
          epilogue.packed[packed_index(token, column, n_rows / 2)] = __half_as_ushort(__float2half_rn(product));
      }
      continue;
    }
    for (int e = static_cast<int>(threadIdx.x); e < held * kTileFloats; e += kThreads) {
      const int t = e / kTileFloats, within = e % kTileFloats, owner = within / 4, element = within % 4;
      const float sum = total(t, within);
      const int64_t row = row_tile * kMmaRows + owner / 4 + 8 * (element / 2);
      const int64_t token = (first_token_tile + t) * kMmaTokens + 2 * (owner % 4) + element % 2;
      if (token >= n_tokens) continue;
      if (epilogue.mode == MmaOutput::Store) {
        epilogue.out[token * n_rows + row] = sum;
      } else if (epilogue.mode == MmaOutput::Add) {
        float* target = epilogue.out + token * n_rows + row;
        *target = __fadd_rn(*target, sum);
      } else if (row < epilogue.first_rows) {  // SplitThree
        epilogue.out[token * epilogue.first_rows + row] = sum;
      } else if (row < epilogue.first_rows + epilogue.second_rows) {
        epilogue.second[token * epilogue.second_rows + row - epilogue.first_rows] = sum;
      } else {
        const int64_t third_rows = n_rows - epilogue.first_rows - epilogue.second_rows;
        epilogue.third[token * third_rows + row - epilogue.first_rows - epilogue.second_rows] = sum;
      }
    }
  }
}

// elementwise.cu's rmsnorm_kernel's arithmetic (rmsnorm_scale.h), each result rounded to f16
// straight into its packed place.
__global__ void __launch_bounds__(kNormThreads)
    rmsnorm_pack_kernel(const float* __restrict__ x, const float* __restrict__ weight, int64_t n, float eps,
                        uint16_t* __restrict__ packed) {
  const int64_t token = blockIdx.x;
  const float* row = x + token * n;
  const float scale = rmsnorm_scale(row, n, eps);
  for (int64_t i = threadIdx.x; i < n; i += kNormThreads)
    packed[packed_index(token, i, n)] =
        __half_as_ushort(__float2half_rn(__fmul_rn(__fmul_rn(row[i], scale), weight[i])));
}

template <Weights kWeights>
void launch(const uint8_t* weights, int64_t n_rows, int64_t n_cols, const uint16_t* packed_x, int64_t n_tokens,
            const MmaEpilogue& epilogue, cudaStream_t stream) {
  const int64_t row_tiles = n_rows / kMmaRows, col_tiles = n_cols / kMmaCols;
  const int64_t token_tiles = (n_tokens + kMmaTokens - 1) / kMmaTokens;
  const auto* b = reinterpret_cast<const uint2*>(packed_x);
  const __half* scales = kWeights == Weights::Q8_0
                             ? reinterpret_cast<const __half*>(weights + q8_0_mma_scale_offset(n_rows, n_cols))
                             : nullptr;
  const auto row_blocks = [&](int row_tiles_per_block) {
    return static_cast<unsigned>(row_tiles / row_tiles_per_block);
  };
  if (token_tiles == 1) {  // decode: a block per row tile, the most blocks to stream the weights
    mma_kernel<kWeights, 1, 1><<<dim3(row_blocks(1), 1), kThreads, 0, stream>>>(weights, scales, n_rows, col_tiles, b,
                                                                                token_tiles, n_tokens, epilogue);
  } else {
    // Prefill and batches: 8 token tiles a block, and two row tiles where they pair up, so each
    // activation load feeds two mma.
    constexpr int kHeld = 8;
    const dim3 grid(row_tiles % 2 == 0 ? row_blocks(2) : row_blocks(1),
                    static_cast<unsigned>((token_tiles + kHeld - 1) / kHeld));
    if (row_tiles % 2 == 0)
      mma_kernel<kWeights, kHeld, 2>
          <<<grid, kThreads, 0, stream>>>(weights, scales, n_rows, col_tiles, b, token_tiles, n_tokens, epilogue);
    else
      mma_kernel<kWeights, kHeld, 1>
          <<<grid, kThreads, 0, stream>>>(weights, scales, n_rows, col_tiles, b, token_tiles, n_tokens, epilogue);
  }
  TANDEM_CUDA_CHECK_LAUNCH();
}

}  // namespace

void pack_activations_f16_mma(const float* x, int64_t n_tokens, int64_t n_cols, uint16_t* packed, cudaStream_t stream) {
  if (n_tokens == 0) return;
  const int64_t col_tiles = n_cols / kMmaCols;
  const int64_t n_lanes = f16_mma_activation_halves(n_tokens, n_cols) / 4;
  constexpr int kBlock = 256;
  pack_activations_kernel<<<static_cast<unsigned>((n_lanes + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      x, n_tokens, n_cols, col_tiles, n_lanes, reinterpret_cast<uint2*>(packed));
  TANDEM_CUDA_CHECK_LAUNCH();
}

void rmsnorm_pack_f16_mma(const float* x, const float* weight, int64_t n_tokens, int64_t n, float eps, uint16_t* packed,
                          cudaStream_t stream) {
  if (n_tokens == 0) return;
  rmsnorm_pack_kernel<<<static_cast<unsigned>(n_tokens), kNormThreads, 0, stream>>>(x, weight, n, eps, packed);
  TANDEM_CUDA_CHECK_LAUNCH();
}

void matmul_mma(DType type, const void* weights, int64_t n_rows, int64_t n_cols, const uint16_t* packed_x,
                int64_t n_tokens, const MmaEpilogue& epilogue, cudaStream_t stream) {
  if (n_tokens == 0) return;
  const bool fits =
      type == DType::F16 ? fits_f16_mma(n_rows, n_cols) : type == DType::Q8_0 && fits_q8_0_mma(n_rows, n_cols);
  if (!fits || (epilogue.mode == MmaOutput::SwiGluPacked && n_rows % (2 * kMmaCols) != 0))
    throw CudaError("cuda::matmul_mma: a " + std::to_string(n_rows) + "x" + std::to_string(n_cols) + " " +
                    std::string(dtype_name(type)) + " matrix does not fit the tensor-core layout");
  const auto* bytes = static_cast<const uint8_t*>(weights);
  if (type == DType::F16)
    launch<Weights::F16>(bytes, n_rows, n_cols, packed_x, n_tokens, epilogue, stream);
  else
    launch<Weights::Q8_0>(bytes, n_rows, n_cols, packed_x, n_tokens, epilogue, stream);
}

void matmul_f16_mma(const uint16_t* tiles, int64_t n_rows, int64_t n_cols, const uint16_t* packed_x, int64_t n_tokens,
                    float* out, cudaStream_t stream) {
  matmul_mma(DType::F16, tiles, n_rows, n_cols, packed_x, n_tokens, {.mode = MmaOutput::Store, .out = out}, stream);
}

void matmul_q8_0_mma(const uint8_t* packed, int64_t n_rows, int64_t n_cols, const uint16_t* packed_x, int64_t n_tokens,
                     float* out, cudaStream_t stream) {
  matmul_mma(DType::Q8_0, packed, n_rows, n_cols, packed_x, n_tokens, {.mode = MmaOutput::Store, .out = out}, stream);
}

}  // namespace tandem::cuda
