// The AVX-512 level's GEMMs on weights repacked at load into the shared 16-row layouts
// (kernels/packed/): one lane per weight row, so a row's integer sum never needs a
// horizontal add and one weight load serves a tile of tokens. The same kernels run the AMX
// level's decode (a tile multiply does not pay for one token), and their arithmetic per
// (token, row) lane is the AMX tile kernels', so both levels give the same bits.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem::avx512 {

// Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4 weights packed by packed::q8_pack_into
// (kernels/avx512/gemm_q8_packed.cpp).
// out[t * out_stride + r] for r in [row_begin, row_end), t in [0, n_tokens); any row range,
// any token count. Needs weight.packed and AVX-512 VNNI.
GemmQ8Kernel gemm_q8_packed;

// Q4_K/Q6_K weights packed by packed::kquant_pack_into (kernels/avx512/gemm_kquant_packed.cpp),
// bit-identical to the row kernels (dot_q8k_activations). Same contract as gemm_q8_packed.
GemmQ8KKernel gemm_kquant_packed;

}  // namespace tandem::avx512
