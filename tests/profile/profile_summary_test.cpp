// Tests of the summary arithmetic on records with chosen times: roofline bounds per site
// (memory- or compute-bound, int8 or f32 peak), rows folded by kind and by weight over
// layers, the op losing most, and the printed tables with and without ceilings.
#include "profile/profile_summary.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

OpCost weight_cost(DType type, int64_t bytes, int64_t flops) {
  OpCost cost;
  cost.bytes = bytes;
  cost.flops = flops;
  cost.peak = Peak::Int8;
  cost.has_weight = true;
  cost.weight_type = type;
  return cost;
}

MachineCeilings test_ceilings() {
  MachineCeilings ceilings;
  ceilings.cpu = "test cpu";
  ceilings.isa = "avx512";
  ceilings.threads = 2;
  ceilings.read_gbps = 10.0;   // 10 bytes per ns
  ceilings.int8_gops = 100.0;  // 100 ops per ns
  ceilings.f32_gflops = 20.0;  // 20 flops per ns
  return ceilings;
}

TEST(ProfileSummary, BoundIsTheSlowerOfMemoryAndCompute) {
  const MachineCeilings ceilings = test_ceilings();
  SiteStats memory_bound;
  memory_bound.bytes = 1000;  // 100 ns at 10 GB/s
  memory_bound.flops = 2000;  // 20 ns at 100 GOP/s
  memory_bound.peak = Peak::Int8;
  EXPECT_EQ(roofline_bound_ns(memory_bound, ceilings), 100);
  SiteStats compute_bound = memory_bound;
  compute_bound.peak = Peak::F32;  // 2000 flops at 20 GFLOP/s: 100 ns
  compute_bound.flops = 4000;      // 200 ns
  EXPECT_EQ(roofline_bound_ns(compute_bound, ceilings), 200);
}

TEST(ProfileSummary, AttentionIsHeldAgainstTheInstructionCeilingOfItsArithmetic) {
  MachineCeilings ceilings = test_ceilings();
  SiteStats attention;
  attention.bytes = 10;     // 1 ns: compute bound
  attention.flops = 16000;  // f32 GEMM 800 ns, FMA 400 ns, bf16 200 ns
  attention.peak = Peak::F32;
  EXPECT_EQ(roofline_bound_ns(attention, ceilings), 800);
  // Without instruction ceilings (an old cache entry) they fall back to the level below.
  attention.peak = Peak::FmaF32;
  EXPECT_EQ(roofline_bound_ns(attention, ceilings), 800);
  attention.peak = Peak::Bf16;
  EXPECT_EQ(roofline_bound_ns(attention, ceilings), 800);
  ceilings.fma_gflops = 40.0;
  ceilings.bf16_gflops = 80.0;
  attention.peak = Peak::FmaF32;
  EXPECT_EQ(roofline_bound_ns(attention, ceilings), 400);
  attention.peak = Peak::Bf16;
  EXPECT_EQ(roofline_bound_ns(attention, ceilings), 200);
  attention.peak = Peak::Bf16Values;  // half the flops each way: 200 + 100 ns
  EXPECT_EQ(roofline_bound_ns(attention, ceilings), 300);
}

// Two layers of ffn_down and attention in two decode steps, times chosen by hand.
Profiler::Snapshot hand_made_profile() {
  Profiler profiler;
  profiler.prepare(2);
  for (int step = 0; step < 2; ++step) {
    profiler.begin_step(Phase::Decode, 1);
    // ffn_down layer 0: bound 100 ns (1000 bytes), took 150; layer 1: same bound, took 700.
    profiler.record(OpRole::Down, 0, 0, 150, weight_cost(DType::Q8_0, 1000, 2000));
    profiler.record(OpRole::Down, 1, 0, 700, weight_cost(DType::Q8_0, 1000, 2000));
    // attention layer 1: f32, 4000 flops -> 200 ns bound, took 250.
    profiler.record(OpRole::Attention, 1, 0, 250, OpCost{100, 4000, Peak::F32, false, DType::F32});
    profiler.end_step();
  }
  return profiler.snapshot();
}

TEST(ProfileSummary, FoldsSitesByKindAndWeightAndFindsTheOpLosingMost) {
  const ProfileSummary summary = summarize(hand_made_profile(), test_ceilings());
  ASSERT_EQ(summary.phases.size(), 1u);
  const PhaseSummary& decode = summary.phases[0];
  EXPECT_EQ(decode.phase, Phase::Decode);
  EXPECT_EQ(decode.totals.steps, 2);
  EXPECT_EQ(decode.totals.op_ns, 2 * (150 + 700 + 250));
  EXPECT_EQ(decode.all.ns, 2 * (150 + 700 + 250));
  EXPECT_EQ(decode.all.bound_ns, 2 * (100 + 100 + 200));

  ASSERT_EQ(decode.by_kind.size(), 2u);
  EXPECT_EQ(decode.by_kind[0].name, "matmul");
  EXPECT_EQ(decode.by_kind[0].calls, 4);
  EXPECT_EQ(decode.by_kind[0].ns, 2 * (150 + 700));
  EXPECT_EQ(decode.by_kind[1].name, "attention");
  EXPECT_EQ(decode.by_kind[1].bound_ns, 400);

  ASSERT_EQ(decode.by_weight.size(), 1u);
  EXPECT_EQ(decode.by_weight[0].name, "ffn_down Q8_0");
  EXPECT_EQ(decode.by_weight[0].calls, 4);
  EXPECT_EQ(decode.by_weight[0].bytes, 4000);
  EXPECT_DOUBLE_EQ(decode.by_weight[0].gbps(), 4000.0 / 1700.0);

  // Layer 1's ffn_down loses 2 x 600 ns, more than attention (2 x 50) or layer 0 (2 x 50).
  EXPECT_EQ(decode.worst.name, "blk.1.ffn_down Q8_0");
  EXPECT_EQ(decode.worst.ns - decode.worst.bound_ns, 1200);
  // Of the kinds, matmul loses 1300 ns over its 400 ns bound; attention 100 ns.
  EXPECT_EQ(decode.worst_kind.name, "matmul");
  EXPECT_EQ(decode.worst_kind.ns - decode.worst_kind.bound_ns, 1300);

  const std::string text = format_summary(summary);
  EXPECT_NE(text.find("loses most: blk.1.ffn_down Q8_0"), std::string::npos) << text;
  EXPECT_NE(text.find("| ffn_down Q8_0"), std::string::npos) << text;
  EXPECT_NE(text.find("% bound"), std::string::npos) << text;
  EXPECT_EQ(text.find("prefill:"), std::string::npos) << text;
}

TEST(ProfileSummary, WithoutCeilingsThereAreNoRooflineColumns) {
  const ProfileSummary summary = summarize(hand_made_profile(), std::nullopt);
  ASSERT_EQ(summary.phases.size(), 1u);
  EXPECT_EQ(summary.phases[0].all.bound_ns, 0);
  EXPECT_EQ(summary.phases[0].worst.name, "blk.1.ffn_down Q8_0");  // the slowest, then
  const std::string text = format_summary(summary);
  EXPECT_EQ(text.find("% bound"), std::string::npos) << text;
  EXPECT_NE(text.find("tandem bench --machine"), std::string::npos) << text;
  EXPECT_NE(text.find("slowest op: blk.1.ffn_down Q8_0"), std::string::npos) << text;
}

TEST(ProfileSummary, SiteNamesCarryLayerAndWeightType) {
  SiteStats site;
  site.has_weight = true;
  site.weight_type = DType::Q4_0;
  EXPECT_EQ(site_name(OpRole::Wq, 3, site), "blk.3.attn_q Q4_0");
  EXPECT_EQ(site_name(OpRole::Output, -1, site), "output Q4_0");
  EXPECT_EQ(site_name(OpRole::Attention, 0, SiteStats{}), "blk.0.attention");
  EXPECT_EQ(site_name(OpRole::Sampling, -1, SiteStats{}), "sampling");
}

}  // namespace
}  // namespace tandem
