// AMX-INT8 GEMM for Q4_K and Q6_K weights (the k-quants of a "Q4_K_M" file) against
// activations in 256-element 8-bit blocks. Weights are repacked once at load into groups of
// 16 rows, sub-block by sub-block, in the VNNI order a tile multiply wants (layout in
// amx_kquant_gemm.cpp; no bigger than the file's blocks). One tile multiply gives the exact
// integer dot products of 16 tokens x 16 rows for one sub-block; the sub-block scales are
// applied in integers and each (token, row) lane then takes the float steps of
// dot_q8k_activations (kernels/dot_kquants.h) — so every result equals the row kernels' bit
// for bit, and decode (<= 4 tokens: 512-bit dpbusd on the same packed bytes, no tile
// registers) equals prefill.
#pragma once

#include <cstdint>

#include "base/tensor_view.h"
#include "kernels/dot_kquants.h"

namespace tandem::amx {

// Q4_K or Q6_K, 2-D, rows a multiple of 256 elements.
bool kquant_packable(const TensorView& weight);
int64_t kquant_packed_bytes(const TensorView& weight);
void kquant_pack_into(const TensorView& weight, uint8_t* out);

// out[t * out_stride + r] for r in [row_begin, row_end), t in [0, n_tokens); x holds
// n_tokens rows of row_length / 256 blocks. Needs weight.packed and an AMX machine.
void gemm_kquant(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                 int64_t n_tokens, float* out, int64_t out_stride);

}  // namespace tandem::amx
