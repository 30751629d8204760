// Weight matrix times activations on the device, weights in their file's block format
// (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K; block_dequant.h), dequantised in registers, f32
// accumulation. One kernel for decode and prefill: a warp owns a weight row and walks the
// tokens in tiles of kMatmulTokenTile, so each weight element is read once per tile (once
// per step at decode batches up to the tile) and a row's output arithmetic — lane l sums
// elements l, l+32, ... by fused multiply-add in order, then a fixed xor-butterfly across the
// warp — is the same whatever the batch: batch invariance by construction.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "base/dtype.h"

namespace tandem::cuda {

constexpr int64_t kMatmulTokenTile = 16;

// A [n_rows, n_cols] weight matrix in device memory, row r at data + r * row_bytes. With
// scales set (Q8_0, Q4_0 only: block_dequant.h split_block_rows), the split layout: row r's
// quants at data + r * row_bytes (row_bytes = cuda_split_quant_row_bytes), its block scales at
// scales + r * n_cols / 32.
struct DeviceMatrix {
  const void* data = nullptr;
  DType type = DType::F32;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  int64_t row_bytes = 0;
  const uint16_t* scales = nullptr;
};

// out[t * out_stride + r] = sum_c weight[r, c] * x[t * n_cols + c], for t < n_tokens; with
// `accumulate`, out[t * out_stride + r] += that sum instead (one rounding: the residual add
// fused). out_stride 0 means n_rows (a stride above it writes into wider rows: one part of a
// concatenated output). x: [n_tokens, n_cols] (16-byte aligned), out: [n_tokens, out_stride],
// both device memory. n_cols must be whole blocks of the weight's type. Asynchronous on
// `stream`; throws CudaError if the launch fails.
void matmul(const DeviceMatrix& weight, const float* x, int64_t n_tokens, float* out, cudaStream_t stream,
            bool accumulate = false, int64_t out_stride = 0);

}  // namespace tandem::cuda
