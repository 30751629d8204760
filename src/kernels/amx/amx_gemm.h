// AMX-INT8 kernels for Q8_0 and Q4_0 weights, on the packed layout the SIMD levels share
// (kernels/packed/q8_layout.h: per 16-row group and 32-element block, the VNNI order a B
// tile loads straight from memory). One tile multiply gives the exact integer dot products
// of 16 tokens x 16 rows for one block; each (token, row) lane then adds int * (d_w * d_x)
// to its own float accumulator, block after block. Decode (a few tokens) goes to the
// AVX-512 kernel on the same bytes with the same arithmetic, and a lane's arithmetic never
// depends on its neighbours: batch-invariant, prefill equal to decode.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem::amx {

// GemmQ8Fn (kernel_contract.h). Uses weight.packed when set, else the AVX-512 row-major kernel.
GemmQ8Kernel gemm_q8;

}  // namespace tandem::amx
