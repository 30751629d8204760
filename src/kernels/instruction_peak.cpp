// Dispatch of the instruction loops (instruction_peak.h) to the level that has them.
#include "kernels/instruction_peak.h"

namespace tandem {

InstructionLoop fma_f32_loop(Isa isa, int64_t iterations) {
  switch (isa) {
    case Isa::Avx512:
    case Isa::Amx: return avx512::fma_f32_loop(iterations);
    case Isa::Avx2: return avx2::fma_f32_loop(iterations);
    default: return {};
  }
}

InstructionLoop dot_bf16_loop(Isa isa, int64_t iterations) {
  if ((isa == Isa::Avx512 || isa == Isa::Amx) && cpu_has_avx512_bf16()) return avx512::dot_bf16_loop(iterations);
  return {};
}

InstructionLoop tile_bf16_loop(Isa isa, int64_t iterations) {
  if (isa == Isa::Amx && cpu_has_amx_bf16()) return amx::tile_bf16_loop(iterations);
  return {};
}

}  // namespace tandem
