// AMX-INT8 kernels for Q8_0 and Q4_0 weights. Weights are repacked once at load into tiles
// of 16 rows x one 32-element block in the VNNI order the tile multiply wants, so a tile
// loads straight from memory. One tile multiply gives the exact integer dot products of 16
// tokens x 16 rows for one block; each (token, row) lane then adds int * (d_w * d_x) to its
// own float accumulator, block after block. The same code serves 1 token (decode) and many
// (prefill), and a lane's arithmetic never depends on its neighbours: batch-invariant.
#pragma once

#include <cstdint>
#include <vector>

#include "base/tensor_view.h"
#include "kernels/dot.h"

namespace tandem::amx {

// Can this weight be packed for the AMX level's kernels (Q8_0, Q4_0; Q4_K/Q6_K for
// amx_kquant_gemm.h; F32/F16/BF16 for avx512/gemm_float_packed.h; 2-D)?
bool packable(const TensorView& weight);
// The packed bytes for `weight` (see the layout in amx_gemm.cpp): pack_into writes
// packed_bytes(weight) bytes to `out`; pack returns them in a vector.
int64_t packed_bytes(const TensorView& weight);
void pack_into(const TensorView& weight, uint8_t* out);
std::vector<uint8_t> pack(const TensorView& weight);

// GemmFloatFn (kernel_table.h): the element-major packed kernel (avx512/gemm_float_packed.h)
// when weight.packed is set, else the row-major AVX-512 kernel.
void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride);

// GemmQ8Fn (kernel_table.h). Uses weight.packed when set, else the AVX-512 kernel.
void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
             int64_t n_tokens, float* out, int64_t out_stride);

}  // namespace tandem::amx
