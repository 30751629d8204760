// AVX-512 GEMM for F32/F16/BF16 weights repacked at load into 16-row groups stored
// element-major (layout and arithmetic in gemm_float_packed.cpp). The AVX-512 and AMX levels
// pack float matrices this way (their packers in kernels/kernel_table.cpp). Packing runs
// AVX-512 code too: only those levels call it.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem::avx512 {

bool float_packable(const TensorView& weight);  // F32, F16 or BF16, 2-D
int64_t float_packed_bytes(const TensorView& weight);
void float_pack_into(const TensorView& weight, uint8_t* out);

// out[t * out_stride + r] for r in [row_begin, row_end), t in [0, n_tokens), any row range.
// Needs weight.packed.
GemmFloatKernel gemm_float_packed;

}  // namespace tandem::avx512
