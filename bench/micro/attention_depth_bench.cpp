// Prefill attention at depth, one kernel call as the forward pass makes it: a chunk of tokens
// (x the GQA group) over a KV cache of F16 rows that already holds `depth` positions, at the
// f32 AVX-512 kernel, the AVX-512 bf16 kernel and the AMX-BF16 tile kernel, one thread. The
// attention FLOPs of the chunk (4·head_dim per query and position it sees) over the time give
// the rate to hold against `tandem bench --machine`'s instruction ceilings (issue 32).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/half.h"
#include "kernels/amx/attention_amx.h"
#include "kernels/attention.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/cpu_features.h"

namespace tandem {
namespace {

constexpr int64_t kHeadDim = 128;
constexpr int64_t kGroup = 2;     // qwen3-0.6b: 16 query heads over 8 KV heads
constexpr int64_t kChunk = 512;   // the forward pass's prefill chunk

enum class Kernel : int64_t { F32Avx512 = 0, Bf16Avx512 = 1, Bf16Amx = 2 };

std::vector<uint16_t> random_f16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> out(n);
  for (uint16_t& v : out) v = f32_to_f16(normal(rng));
  return out;
}

void BM_attention_at_depth(benchmark::State& state) {
  const auto kernel = static_cast<Kernel>(state.range(0));
  const int64_t depth = state.range(1);
  if (detect_isa() < Isa::Avx512) return state.SkipWithError("needs AVX-512");
  if (kernel != Kernel::F32Avx512 && !cpu_has_avx512_bf16()) return state.SkipWithError("needs AVX512_BF16");
  if (kernel == Kernel::Bf16Amx && !cpu_has_amx_bf16()) return state.SkipWithError("needs AMX-BF16");
  const int64_t n_slots = depth + kChunk;
  const std::vector<uint16_t> keys = random_f16(static_cast<size_t>(n_slots * kHeadDim), 1);
  const std::vector<uint16_t> values = random_f16(static_cast<size_t>(n_slots * kHeadDim), 2);
  const KvRows key_rows{reinterpret_cast<const uint8_t*>(keys.data()), kHeadDim * 2, DType::F16};
  const KvRows value_rows{reinterpret_cast<const uint8_t*>(values.data()), kHeadDim * 2, DType::F16};
  std::vector<int32_t> slots(static_cast<size_t>(n_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<int32_t> positions(static_cast<size_t>(kChunk));
  std::iota(positions.begin(), positions.end(), static_cast<int32_t>(depth));
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> queries(static_cast<size_t>(kChunk * kGroup * kHeadDim));
  for (float& q : queries) q = normal(rng);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(kChunk * kGroup)));
  std::vector<float> out(queries.size());
  const int64_t stride = kGroup * kHeadDim;
  const auto run = kernel == Kernel::F32Avx512   ? &avx512::attention_tokens
                   : kernel == Kernel::Bf16Avx512 ? &avx512::attention_tokens_bf16
                                                  : &amx::attention_tokens_bf16;
  for (auto _ : state) {
    run(queries.data(), stride, kChunk, kGroup, positions.data(), key_rows, value_rows, 0, slots.data(), kHeadDim,
        scratch.data(), out.data(), stride, 0.0f, nullptr, nullptr);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  double positions_seen = 0;
  for (const int32_t p : positions) positions_seen += static_cast<double>(p) + 1.0;
  state.counters["flops"] =
      benchmark::Counter(4.0 * positions_seen * kHeadDim * kGroup, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::OneK::kIs1000);
}
BENCHMARK(BM_attention_at_depth)
    ->ArgNames({"kernel", "depth"})
    ->ArgsProduct({{0, 1, 2}, {0, 4096}})
    ->Unit(benchmark::kMillisecond);

// One decode step's attention for one KV head (the group's queries at position depth), the
// same kernels: bound by reading the depth's K/V rows (2·depth·head_dim F16 values).
void BM_decode_attention_at_depth(benchmark::State& state) {
  const auto kernel = static_cast<Kernel>(state.range(0));
  const int64_t depth = state.range(1);
  if (detect_isa() < Isa::Avx512) return state.SkipWithError("needs AVX-512");
  if (kernel != Kernel::F32Avx512 && !cpu_has_avx512_bf16()) return state.SkipWithError("needs AVX512_BF16");
  if (kernel == Kernel::Bf16Amx && !cpu_has_amx_bf16()) return state.SkipWithError("needs AMX-BF16");
  const int64_t n_ctx = depth + 1;
  const std::vector<uint16_t> keys = random_f16(static_cast<size_t>(n_ctx * kHeadDim), 1);
  const std::vector<uint16_t> values = random_f16(static_cast<size_t>(n_ctx * kHeadDim), 2);
  const KvRows key_rows{reinterpret_cast<const uint8_t*>(keys.data()), kHeadDim * 2, DType::F16};
  const KvRows value_rows{reinterpret_cast<const uint8_t*>(values.data()), kHeadDim * 2, DType::F16};
  std::vector<int32_t> slots(static_cast<size_t>(n_ctx));
  std::iota(slots.begin(), slots.end(), 0);
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> queries(static_cast<size_t>(kGroup * kHeadDim));
  for (float& q : queries) q = normal(rng);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(kGroup)));
  std::vector<float> out(queries.size());
  const auto run = kernel == Kernel::F32Avx512   ? &avx512::attention_group
                   : kernel == Kernel::Bf16Avx512 ? &avx512::attention_group_bf16
                                                  : &amx::attention_group_bf16;
  for (auto _ : state) {
    run(queries.data(), kGroup, key_rows, value_rows, 0, slots.data(), n_ctx, kHeadDim, scratch.data(), out.data(),
        0.0f, nullptr, nullptr);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * n_ctx * kHeadDim * 2);
}
BENCHMARK(BM_decode_attention_at_depth)
    ->ArgNames({"kernel", "depth"})
    ->ArgsProduct({{0, 1, 2}, {4096}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace tandem
