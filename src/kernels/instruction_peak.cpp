// The instruction loops (instruction_peak.h) of a level: its table's (KernelTable::
// instruction_loops), which has them only where the level and the CPU have the instruction.
#include "kernels/instruction_peak.h"

#include "kernels/kernel_table.h"

namespace tandem {
namespace {

InstructionLoop run_loop(Isa isa, InstructionLoopFn InstructionLoops::*loop, int64_t iterations) {
  // A level above the CPU's has no table (nor the instruction).
  if (static_cast<int>(isa) > static_cast<int>(detect_isa())) return {};
  const InstructionLoopFn run = kernel_table(isa).instruction_loops.*loop;
  return run != nullptr ? run(iterations) : InstructionLoop{};
}

}  // namespace

InstructionLoop fma_f32_loop(Isa isa, int64_t iterations) {
  return run_loop(isa, &InstructionLoops::fma_f32, iterations);
}

InstructionLoop dot_bf16_loop(Isa isa, int64_t iterations) {
  return run_loop(isa, &InstructionLoops::dot_bf16, iterations);
}

InstructionLoop tile_bf16_loop(Isa isa, int64_t iterations) {
  return run_loop(isa, &InstructionLoops::tile_bf16, iterations);
}

InstructionLoop dot_i8_loop(Isa isa, int64_t iterations) {
  return run_loop(isa, &InstructionLoops::dot_i8, iterations);
}

}  // namespace tandem
