// matmul over a thread pool: quantize the activations once (when the weight type wants
// 8-bit activations), then each thread walks its tiles of weight rows and, per tile, every
// token — so a tile stays in cache across tokens, the reuse that makes prefill cheap.
#include "kernels/matmul.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/kernel_table.h"

namespace tandem {

namespace {
constexpr int64_t kRowTile = 16;
// Row-major float kernels take the tokens 128 at a time: a long prompt's f32 activations do
// not stay in L2 (1-thread F16 5632x2048x512 with 4x6 tiles: chunks of 64 ~49, of 128 ~55
// GFLOP/s when measured side by side).
constexpr int64_t kFloatTokenChunk = 128;

// K-quant weights: activations in 256-element blocks, then the level's k-quant GEMM.
void matmul_kquant(const TensorView& weight, const float* x, int64_t n_tokens, float* out, ThreadPool& pool,
                   MatmulScratch& scratch) {
  const int64_t n_out = weight.n_rows();
  const int64_t n_in = weight.row_length();
  TANDEM_ASSERT(n_in % 256 == 0);
  const int64_t blocks_per_row = n_in / 256;
  const size_t needed = static_cast<size_t>(n_tokens * blocks_per_row);
  if (scratch.quantized_k.size() < needed) scratch.quantized_k.resize(needed);
  ActivationBlockQ8K* qx = scratch.quantized_k.data();
  const KernelTable& kernels = kernel_table();
  pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) kernels.quantize_q8k(x + t * n_in, n_in, qx + t * blocks_per_row);
  });
  pool.parallel_for(
      n_out,
      [&](int64_t row_begin, int64_t row_end, int) {
        kernels.gemm_q8k(weight, row_begin, row_end, qx, n_tokens, out, n_out);
      },
      kRowTile);
}

}  // namespace

void matmul(const TensorView& weight, const float* x, int64_t n_tokens, float* out, ThreadPool& pool,
            MatmulScratch& scratch) {
  const int64_t n_out = weight.n_rows();
  const int64_t n_in = weight.row_length();
  TANDEM_ASSERT(weight.n_dims == 2);
  const KernelTable& kernels = kernel_table();
  const bool quantized = uses_q8_activations(weight.dtype);
  if (quantized) {
    TANDEM_ASSERT(n_in % 32 == 0);
    const int64_t blocks_per_row = n_in / 32;
    const size_t needed = static_cast<size_t>(n_tokens * blocks_per_row);
    if (scratch.quantized.size() < needed) scratch.quantized.resize(needed);
    pool.parallel_for(n_tokens, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t)
        kernels.quantize_q8(x + t * n_in, n_in, scratch.quantized.data() + t * blocks_per_row);
    });
  }
  if (uses_q8k_activations(weight.dtype)) {
    matmul_kquant(weight, x, n_tokens, out, pool, scratch);
    return;
  }
  const ActivationBlockQ8* qx = scratch.quantized.data();
  pool.parallel_for(
      n_out,
      [&](int64_t row_begin, int64_t row_end, int) {
        if (weight.packed != nullptr) {  // packed kernels tile by themselves
          if (quantized)
            kernels.gemm_q8(weight, row_begin, row_end, qx, n_tokens, out, n_out);
          else
            kernels.gemm_float(weight, row_begin, row_end, x, n_tokens, out, n_out);
          return;
        }
        if (quantized) {
          // Row tiles keep one tile of weights in cache while every token passes over it.
          for (int64_t tile = row_begin; tile < row_end; tile += kRowTile)
            kernels.gemm_q8(weight, tile, std::min(row_end, tile + kRowTile), qx, n_tokens, out, n_out);
          return;
        }
        // Float activations are 4 bytes an element: a long prompt's no longer fit in L2, so
        // they go through in chunks, each passing over all of the thread's row tiles.
        for (int64_t chunk = 0; chunk < n_tokens; chunk += kFloatTokenChunk) {
          const int64_t chunk_tokens = std::min(kFloatTokenChunk, n_tokens - chunk);
          for (int64_t tile = row_begin; tile < row_end; tile += kRowTile)
            kernels.gemm_float(weight, tile, std::min(row_end, tile + kRowTile), x + chunk * n_in, chunk_tokens,
                               out + chunk * n_out, n_out);
        }
      },
      kRowTile);
}

}  // namespace tandem
