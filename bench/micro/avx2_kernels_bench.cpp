// Google Benchmark of the AVX2 level's own kernels (kernels/avx2/avx2_kernels.h) beside the
// portable ones they replace, at tinyllama-1.1b's sizes (head_dim 64, 4 KV heads, d_ff 5632):
// one token's attention (decode), a prefill's attention in one attention_tokens call, SwiGLU
// and the activation quantizers. Single-threaded; skipped on CPUs without AVX2.
#include <benchmark/benchmark.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

constexpr int64_t kKvHeads = 4, kHeadDim = 64, kDff = 5632;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

bool skip_without_avx2(benchmark::State& state) {
  if (static_cast<int>(detect_isa()) >= static_cast<int>(Isa::Avx2)) return false;
  state.SkipWithError("no AVX2 on this machine");
  return true;
}

// A KV head's cache of n_slots positions in order.
struct Cache {
  int64_t kv_width = kKvHeads * kHeadDim;
  std::vector<float> keys, values;  // [n_slots, kv_width]
  std::vector<int32_t> slots;       // [n_slots]
  explicit Cache(int64_t n_slots)
      : keys(random_floats(static_cast<size_t>(n_slots * kv_width), 1)),
        values(random_floats(static_cast<size_t>(n_slots * kv_width), 2)),
        slots(static_cast<size_t>(n_slots)) {
    std::iota(slots.begin(), slots.end(), 0);
  }
};

// Arg 0: 0 portable, 1 AVX2.
template <AttentionFn kPortable, AttentionFn kAvx2>
void BM_attention_decode(benchmark::State& state) {
  if (state.range(0) == 1 && skip_without_avx2(state)) return;
  const AttentionFn kernel = state.range(0) == 1 ? kAvx2 : kPortable;
  const int64_t n_ctx = state.range(1), n_queries = state.range(2);
  const Cache cache(n_ctx);
  const std::vector<float> q = random_floats(static_cast<size_t>(n_queries * kHeadDim), 3);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_queries * kHeadDim));
  for (auto _ : state) {
    kernel(q.data(), n_queries, f32_kv_rows(cache.keys.data(), cache.kv_width),
           f32_kv_rows(cache.values.data(), cache.kv_width), kHeadDim, cache.slots.data(), n_ctx, kHeadDim,
           scratch.data(), out.data(), 0.0f, nullptr, nullptr);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["flops"] =
      benchmark::Counter(4.0 * n_ctx * kHeadDim * n_queries, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::OneK::kIs1000);
}
BENCHMARK(BM_attention_decode<portable::attention_group, avx2::attention_group>)
    ->ArgNames({"avx2", "n_ctx", "n_queries"})
    ->ArgsProduct({{0, 1}, {512, 2048}, {1, 8}});

// One KV head's share of an n_tokens prefill: avx2::attention_tokens in one call against the
// portable kernel token by token.
void BM_attention_prefill(benchmark::State& state) {
  const bool use_avx2 = state.range(0) == 1;
  if (use_avx2 && skip_without_avx2(state)) return;
  const int64_t n_tokens = state.range(1), group = state.range(2);
  const Cache cache(n_tokens);
  const std::vector<float> q = random_floats(static_cast<size_t>(n_tokens * group * kHeadDim), 4);
  std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
  std::vector<float> out(static_cast<size_t>(n_tokens * group * kHeadDim));
  const int64_t stride = group * kHeadDim;
  for (auto _ : state) {
    if (use_avx2) {
      avx2::attention_tokens(q.data(), stride, n_tokens, group, positions.data(),
                             f32_kv_rows(cache.keys.data(), cache.kv_width),
                             f32_kv_rows(cache.values.data(), cache.kv_width), kHeadDim, cache.slots.data(), kHeadDim,
                             scratch.data(), out.data(), stride, 0.0f, nullptr, nullptr);
    } else {
      for (int64_t t = 0; t < n_tokens; ++t)
        portable::attention_group(q.data() + t * stride, group, f32_kv_rows(cache.keys.data(), cache.kv_width),
                                  f32_kv_rows(cache.values.data(), cache.kv_width), kHeadDim, cache.slots.data(), t + 1,
                                  kHeadDim, scratch.data(), out.data() + t * stride, 0.0f, nullptr, nullptr);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double positions_seen = 0.5 * static_cast<double>(n_tokens) * static_cast<double>(n_tokens + 1);
  state.counters["flops"] =
      benchmark::Counter(4.0 * positions_seen * kHeadDim * group, benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::OneK::kIs1000);
}
BENCHMARK(BM_attention_prefill)->ArgNames({"avx2", "n_tokens", "group"})->ArgsProduct({{0, 1}, {512}, {1, 8}});

// swiglu_row's portable loop (elementwise.cpp's, libm exp per element) against avx2::swiglu_row.
void BM_swiglu(benchmark::State& state) {
  const bool use_avx2 = state.range(0) == 1;
  if (use_avx2 && skip_without_avx2(state)) return;
  const std::vector<float> gate = random_floats(kDff, 5), up = random_floats(kDff, 6);
  std::vector<float> out(kDff);
  for (auto _ : state) {
    if (use_avx2) {
      avx2::swiglu_row(gate.data(), up.data(), kDff, out.data());
    } else {
      for (int64_t i = 0; i < kDff; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kDff);
}
BENCHMARK(BM_swiglu)->ArgName("avx2")->Arg(0)->Arg(1);

void BM_quantize_q8(benchmark::State& state) {
  const bool use_avx2 = state.range(0) == 1;
  if (use_avx2 && skip_without_avx2(state)) return;
  const std::vector<float> x = random_floats(kDff, 7);
  std::vector<ActivationBlockQ8> out(kDff / 32);
  for (auto _ : state) {
    if (use_avx2) {
      avx2::quantize_q8(x.data(), kDff, out.data());
    } else {
      quantize_activations_q8_isa(Isa::Scalar, x.data(), kDff, out.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kDff);
}
BENCHMARK(BM_quantize_q8)->ArgName("avx2")->Arg(0)->Arg(1);

void BM_quantize_q8k(benchmark::State& state) {
  const bool use_avx2 = state.range(0) == 1;
  if (use_avx2 && skip_without_avx2(state)) return;
  const std::vector<float> x = random_floats(kDff, 8);
  std::vector<ActivationBlockQ8K> out(kDff / 256);
  for (auto _ : state) {
    if (use_avx2) {
      avx2::quantize_q8k(x.data(), kDff, out.data());
    } else {
      quantize_activations_q8k_isa(Isa::Scalar, x.data(), kDff, out.data());
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kDff);
}
BENCHMARK(BM_quantize_q8k)->ArgName("avx2")->Arg(0)->Arg(1);

}  // namespace
}  // namespace tandem
