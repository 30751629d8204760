// The AMX level's table (kernels/amx/amx_table.cpp: the AVX-512 table with the 8-bit GEMMs on
// AMX-INT8 tiles) and the tile instruction loop of the ceilings, as the hub and the tests name
// them. The tile kernels themselves are declared beside their code (amx_gemm.h,
// amx_kquant_gemm.h, attention_amx.h). Only the hub includes this header among the levels.
#pragma once

#include <cstdint>

#include "kernels/kernel_contract.h"

namespace tandem::amx {

const KernelTable& level_table();
// With bf16 attention: Bf16 on the tile kernels (kernels/amx/attention_amx.cpp) when the CPU
// has AMX-BF16; Bf16Values (scores in f32), or no AMX-BF16, as avx512::with_bf16_attention.
KernelTable with_bf16_attention(const KernelTable& level, AttentionArithmetic arithmetic);

// Two tdpbf16ps a round (kernels/amx/instruction_peak_amx.cpp); needs AMX-BF16.
InstructionLoop tile_bf16_loop(int64_t iterations);

}  // namespace tandem::amx
