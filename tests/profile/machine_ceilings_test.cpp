// Tests of the machine ceilings: the cache file keeps one entry per kernel level and thread
// count, survives other entries being added, and a missing, foreign or corrupt file gives no
// ceilings rather than an error; the measurements run (briefly) and give positive rates.
#include "profile/machine_ceilings.h"

#include <gtest/gtest.h>

#include <fstream>

#include "kernels/kernel_table.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using test_support::TempDir;

MachineCeilings sample(std::string isa, int threads, double gbps) {
  MachineCeilings ceilings;
  ceilings.cpu = cpu_model_name();
  ceilings.isa = std::move(isa);
  ceilings.threads = threads;
  ceilings.read_gbps = gbps;
  ceilings.int8_gops = 900.5;
  ceilings.f32_gflops = 300.25;
  ceilings.fma_gflops = 410.5;
  ceilings.bf16_gflops = 820.75;
  ceilings.tile_bf16_gflops = 9000.5;
  return ceilings;
}

TEST(MachineCeilings, CacheKeepsOneEntryPerLevelAndThreadCount) {
  TempDir dir;
  const std::string path = dir.file("sub/machine-test.json");  // the folder is created
  EXPECT_FALSE(load_ceilings(path, "avx512", 2).has_value());
  save_ceilings(path, sample("avx512", 2, 40.0));
  save_ceilings(path, sample("avx2", 2, 30.0));
  save_ceilings(path, sample("avx512", 2, 45.0));  // replaces the first
  const std::optional<MachineCeilings> avx512 = load_ceilings(path, "avx512", 2);
  ASSERT_TRUE(avx512.has_value());
  EXPECT_DOUBLE_EQ(avx512->read_gbps, 45.0);
  EXPECT_DOUBLE_EQ(avx512->int8_gops, 900.5);
  EXPECT_DOUBLE_EQ(avx512->f32_gflops, 300.25);
  EXPECT_DOUBLE_EQ(avx512->fma_gflops, 410.5);
  EXPECT_DOUBLE_EQ(avx512->bf16_gflops, 820.75);
  EXPECT_DOUBLE_EQ(avx512->tile_bf16_gflops, 9000.5);
  EXPECT_EQ(avx512->cpu, cpu_model_name());
  const std::optional<MachineCeilings> avx2 = load_ceilings(path, "avx2", 2);
  ASSERT_TRUE(avx2.has_value());
  EXPECT_DOUBLE_EQ(avx2->read_gbps, 30.0);
  EXPECT_FALSE(load_ceilings(path, "avx512", 1).has_value());
}

TEST(MachineCeilings, ForeignOrCorruptFilesGiveNoCeilings) {
  TempDir dir;
  const std::string path = dir.file("machine.json");
  std::ofstream(path) << R"({"cpu": "some other cpu", "entries": {"avx512-t2": )"
                      << R"({"read_gbps": 1, "int8_gops": 1, "f32_gflops": 1}}})";
  EXPECT_FALSE(load_ceilings(path, "avx512", 2).has_value());
  std::ofstream(path, std::ios::trunc) << "{not json";
  EXPECT_FALSE(load_ceilings(path, "avx512", 2).has_value());
  save_ceilings(path, sample("avx512", 2, 12.0));  // a corrupt cache is rewritten
  ASSERT_TRUE(load_ceilings(path, "avx512", 2).has_value());
}

TEST(MachineCeilings, AnEntryFromBeforeTheInstructionCeilingsLoadsWithThemUnknown) {
  TempDir dir;
  const std::string path = dir.file("machine.json");
  std::ofstream(path) << R"({"cpu": ")" << cpu_model_name() << R"(", "entries": {"avx512-t2": )"
                      << R"({"read_gbps": 30, "int8_gops": 600, "f32_gflops": 140}}})";
  const std::optional<MachineCeilings> old = load_ceilings(path, "avx512", 2);
  ASSERT_TRUE(old.has_value());
  EXPECT_DOUBLE_EQ(old->f32_gflops, 140.0);
  EXPECT_EQ(old->fma_gflops, 0.0);
  EXPECT_EQ(old->bf16_gflops, 0.0);
  EXPECT_EQ(old->tile_bf16_gflops, 0.0);
}

TEST(MachineCeilings, DefaultPathIsUnderTheCacheDirectoryAndNamesTheCpu) {
  TempDir dir;
  ::setenv("TANDEM_CACHE_DIR", dir.file("cache").c_str(), 1);
  const std::string path = default_ceilings_path();
  ::unsetenv("TANDEM_CACHE_DIR");
  EXPECT_EQ(path.rfind(dir.file("cache") + "/machine-", 0), 0u) << path;
  EXPECT_EQ(path.substr(path.size() - 5), ".json");
  EXPECT_EQ(path.find(' '), std::string::npos) << path;
}

TEST(MachineCeilings, CpuNameIsOneNonEmptyLine) {
  const std::string name = cpu_model_name();
  EXPECT_FALSE(name.empty());
  EXPECT_EQ(name.find('\n'), std::string::npos);
  EXPECT_EQ(name.find(':'), std::string::npos) << name;
}

TEST(MachineCeilings, MeasurementsGivePositiveRates) {
  ThreadPool pool(2);
  EXPECT_GT(measure_read_bandwidth(pool, 8, 1), 0.0);
  EXPECT_GT(measure_gemm_peak(pool, DType::Q8_0, 1), 0.0);
  EXPECT_GT(measure_gemm_peak(pool, DType::F32, 1), 0.0);
  // The active level's instruction loops: an FMA loop at every SIMD level, bf16 only with
  // AVX512_BF16 (kernels/instruction_peak.h); none on the scalar level.
  const Isa isa = kernel_table().isa;
  if (isa == Isa::Scalar) {
    EXPECT_EQ(measure_instruction_peak(pool, InstructionLoopKind::FmaF32, 1), 0.0);
  } else {
    EXPECT_GT(measure_instruction_peak(pool, InstructionLoopKind::FmaF32, 1), 0.0);
  }
  const bool bf16 = (isa == Isa::Avx512 || isa == Isa::Amx) && cpu_has_avx512_bf16();
  EXPECT_EQ(measure_instruction_peak(pool, InstructionLoopKind::DotBf16, 1) > 0.0, bf16);
  const bool tiles = isa == Isa::Amx && cpu_has_amx_bf16();
  EXPECT_EQ(measure_instruction_peak(pool, InstructionLoopKind::TileBf16, 1) > 0.0, tiles);
}

}  // namespace
}  // namespace tandem
