// F16 (and Q8_0) weights times activations on the tensor cores (mma.sync m16n8k16, f32 accumulation),
// for decode and prefill alike, in the layout of f16_mma_layout.h: the weights repacked once
// at upload, the activations rounded to F16 and packed per call (pack_activations_f16_mma).
//
// Batch invariance: each output element is one accumulator walking its row's column tiles in
// order within each of kMmaSplits fixed, contiguous column ranges (a function of n_cols
// alone), the eight partial sums then added in range order. How many token tiles a block
// takes (one at decode, eight at prefill) changes which elements a warp computes together,
// never an element's arithmetic, so a token's outputs are the same bits whatever the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"

namespace tandem::cuda {

constexpr int kMmaSplits = 8;

// What the kernel does with each output element's sum (elementwise, after the fixed-order
// sum, so no mode changes an element's arithmetic).
enum class MmaOutput {
  Store,       // out[t * n_rows + r] = sum
  Add,         // out[t * n_rows + r] += sum (a residual stream)
  SplitThree,  // rows [0, a) to out [n_tokens, a], [a, a + b) to second [n_tokens, b], the rest to third
  // Rows interleaved in 8s, gate then up (interleave_gate_up_rows): column j = silu(gate j) * up j,
  // written as packed f16 activations of n_rows / 2 columns (the next matmul's input).
  SwiGluPacked,
};
struct MmaEpilogue {
  MmaOutput mode = MmaOutput::Store;
  float* out = nullptr;
  float* second = nullptr;
  float* third = nullptr;
  int64_t first_rows = 0, second_rows = 0;
  uint16_t* packed = nullptr;
};  // column ranges per output tile: one warp each, summed in order

// x: [n_tokens, n_cols] f32 -> packed: f16_mma_activation_halves(n_tokens, n_cols) halves,
// rounded to nearest. n_cols a multiple of 16.
void pack_activations_f16_mma(const float* x, int64_t n_tokens, int64_t n_cols, uint16_t* packed, cudaStream_t stream);

// rmsnorm (elementwise.h) of x [n_tokens, n] by weight, rounded to f16 and packed as
// pack_activations_f16_mma packs: the same bits as rmsnorm then pack, in one launch. The
// padding tokens of the last tile are left as they are (a token's outputs never read another
// token's column).
void rmsnorm_pack_f16_mma(const float* x, const float* weight, int64_t n_tokens, int64_t n, float eps, uint16_t* packed,
                          cudaStream_t stream);

// out[t * n_rows + r] = sum_c w[r, c] * x[t, c] for t < n_tokens; `tiles` as
// pack_f16_mma_weights writes them, `packed_x` as pack_activations_f16_mma does.
void matmul_f16_mma(const uint16_t* tiles, int64_t n_rows, int64_t n_cols, const uint16_t* packed_x, int64_t n_tokens,
                    float* out, cudaStream_t stream);

// weights (F16 or Q8_0, packed for the tensor cores) times packed_x, finished as `epilogue`
// says. Throws CudaError for a type or shape that does not fit (SwiGluPacked: n_rows a multiple
// of 32).
void matmul_mma(DType type, const void* weights, int64_t n_rows, int64_t n_cols, const uint16_t* packed_x,
                int64_t n_tokens, const MmaEpilogue& epilogue, cudaStream_t stream);

// The same for Q8_0 weights in pack_q8_0_mma_weights's layout: each 32-column block's q . x by
// two mma (the int8 quants are exact in f16), times the block's scale, added in order. n_cols
// a multiple of 32.
void matmul_q8_0_mma(const uint8_t* packed, int64_t n_rows, int64_t n_cols, const uint16_t* packed_x, int64_t n_tokens,
                     float* out, cudaStream_t stream);

}  // namespace tandem::cuda
