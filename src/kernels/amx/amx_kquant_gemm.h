// AMX-INT8 GEMM for Q4_K and Q6_K weights (the k-quants of a "Q4_K_M" file) against
// activations in 256-element 8-bit blocks, on the packed layout the SIMD levels share
// (kernels/packed/kquant_layout.h). One tile multiply gives the exact integer dot products
// of 16 tokens x 16 rows for one sub-block; the sub-block scales are applied in integers and
// each (token, row) lane then takes the float steps of dot_q8k_activations
// (kernels/dot_kquants.h) — so every result equals the row kernels' bit for bit, and decode
// (<= 4 tokens: the AVX-512 dpbusd kernel on the same packed bytes) equals prefill.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem::amx {

// out[t * out_stride + r] for r in [row_begin, row_end), t in [0, n_tokens); x holds
// n_tokens rows of row_length / 256 blocks. Needs weight.packed and an AMX machine.
GemmQ8KKernel gemm_kquant;

}  // namespace tandem::amx
