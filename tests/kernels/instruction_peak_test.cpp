// Tests of the instruction loops behind the machine's instruction ceilings
// (kernels/instruction_peak.h): at each level this CPU has, the loop does exactly the work it
// counts (the accumulators' sum is 0.5 per multiply-add pair of every lane, so a loop the
// compiler shortened or a wrong FLOP count fails), and levels without the instruction say so.
#include "kernels/instruction_peak.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

constexpr int64_t kIterations = 1000;
constexpr int64_t kAccumulators = 12;

bool level_runs_here(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(detect_isa()); }

TEST(InstructionPeak, FmaLoopsDoTheWorkTheyCount) {
  for (const auto& [isa, lanes] : {std::pair{Isa::Avx2, int64_t{8}}, std::pair{Isa::Avx512, int64_t{16}}}) {
    if (!level_runs_here(isa)) {
      std::printf("skipped: the CPU has no %s\n", std::string(isa_name(isa)).c_str());
      continue;
    }
    const InstructionLoop loop = fma_f32_loop(isa, kIterations);
    EXPECT_EQ(loop.flops, kIterations * kAccumulators * lanes * 2) << isa_name(isa);
    EXPECT_EQ(loop.checksum, 0.5 * static_cast<double>(kIterations * kAccumulators * lanes)) << isa_name(isa);
  }
}

TEST(InstructionPeak, Bf16LoopDoesTheWorkItCounts) {
  if (!level_runs_here(Isa::Avx512) || !cpu_has_avx512_bf16()) GTEST_SKIP() << "no AVX512_BF16 on this machine";
  const InstructionLoop loop = dot_bf16_loop(Isa::Avx512, kIterations);
  // 16 lanes, each adding two bf16 products (1 x 0.25) an instruction.
  EXPECT_EQ(loop.flops, kIterations * kAccumulators * 16 * 2 * 2);
  EXPECT_EQ(loop.checksum, 0.5 * static_cast<double>(kIterations * kAccumulators * 16));
}

TEST(InstructionPeak, TileLoopDoesTheWorkItCounts) {
  if (!level_runs_here(Isa::Amx) || !cpu_has_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 on this machine";
  const InstructionLoop loop = tile_bf16_loop(Isa::Amx, kIterations);
  // Two 16 x 16 float tiles, each element adding 32 bf16 products (1 x 0.25) an instruction.
  EXPECT_EQ(loop.flops, kIterations * 2 * 16 * 16 * 32 * 2);
  EXPECT_EQ(loop.checksum, 0.5 * static_cast<double>(kIterations * 2 * 16 * 16 * 16));
}

TEST(InstructionPeak, Int8LoopsDoTheWorkTheyCount) {
  // AVX2: 16 int16 lanes of vpmaddubsw (two products of 1 each); AVX-512: 16 int32 lanes of
  // vpdpbusd (four). Either way every product adds 1 to the checksum.
  for (const auto& [isa, products] : {std::pair{Isa::Avx2, int64_t{32}}, std::pair{Isa::Avx512, int64_t{64}}}) {
    if (!level_runs_here(isa)) {
      std::printf("skipped: the CPU has no %s\n", std::string(isa_name(isa)).c_str());
      continue;
    }
    const InstructionLoop loop = dot_i8_loop(isa, kIterations);
    EXPECT_EQ(loop.flops, kIterations * kAccumulators * products * 2) << isa_name(isa);
    EXPECT_EQ(loop.checksum, static_cast<double>(kIterations * kAccumulators * products)) << isa_name(isa);
  }
}

TEST(InstructionPeak, LevelsWithoutTheInstructionDoNoWork) {
  EXPECT_EQ(fma_f32_loop(Isa::Scalar, kIterations).flops, 0);
  EXPECT_EQ(dot_bf16_loop(Isa::Scalar, kIterations).flops, 0);
  EXPECT_EQ(dot_bf16_loop(Isa::Avx2, kIterations).flops, 0);
  EXPECT_EQ(tile_bf16_loop(Isa::Avx512, kIterations).flops, 0);
  EXPECT_EQ(dot_i8_loop(Isa::Scalar, kIterations).flops, 0);
}

}  // namespace
}  // namespace tandem
