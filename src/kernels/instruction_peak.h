// The ceilings of kernels built from one instruction: loops of independent f32 FMAs, bf16
// pair dot products (AVX512_BF16's vdpbf16ps), AMX bf16 tile products or 8-bit dot products
// on register-resident accumulators, per level.
// Timed by profile/machine_ceilings.cpp, they say what the cores can do with the instructions
// the attention kernels use — the ceiling the issue holds attention against — where the GEMM
// ceilings say what Tandem's own matrix kernels reach with their loads and packing.
#pragma once

#include <cstdint>

#include "kernels/cpu_features.h"

namespace tandem {

// What one loop did: `flops` (2 per multiply-add) and `checksum`, the sum of every accumulator
// lane, whose exact value (0.5 per multiply-add pair; see the tests) shows the arithmetic ran.
struct InstructionLoop {
  int64_t flops = 0;
  double checksum = 0.0;
};

// One level's loop (KernelTable::instruction_loops, kernels/kernel_contract.h).
using InstructionLoopFn = InstructionLoop (*)(int64_t iterations);

// `iterations` rounds of the level's widest f32 FMA over its independent accumulators; flops 0
// on the scalar level (no instruction loop there: its ceiling is its GEMM's).
InstructionLoop fma_f32_loop(Isa isa, int64_t iterations);
// `iterations` rounds of vdpbf16ps (32 products a 512-bit instruction); flops 0 where the level
// or the CPU has no bf16 dot products.
InstructionLoop dot_bf16_loop(Isa isa, int64_t iterations);
// `iterations` rounds of two AMX tdpbf16ps (16 x 16 x 32 products each); flops 0 below the AMX
// level or without AMX-BF16. The ceiling of the AMX attention kernel (kernels/amx/attention_amx.cpp).
InstructionLoop tile_bf16_loop(Isa isa, int64_t iterations);
// `iterations` rounds of the level's 8-bit dot product, unsigned times signed bytes, as its
// quantized GEMMs multiply: AVX2 vpmaddubsw, each result added into an int16 accumulator by
// vpaddw (the pair the AVX2 k-quant and Q8_0 kernels issue), 32 products; AVX-512 vpdpbusd,
// 64 products. flops (here: 2 per product) 0 on the scalar level.
InstructionLoop dot_i8_loop(Isa isa, int64_t iterations);

}  // namespace tandem
