// Google Benchmark of Gemma's tanh-based kernels (src/kernels/geglu.h) on the active level
// (TANDEM_ISA=scalar|avx2|avx512 picks a lower one) at gemma2-2b's sizes (d_ff 9216, vocab
// 256000, 8 query heads of 256 over 4 KV heads, attention soft-cap 50, final soft-cap 30):
// GeGLU over one token's FFN row, the final-logit soft-cap over one row of logits, and one
// token's attention with and without the score soft-cap (the difference is the cap's cost).
// Single-threaded: these run inside one worker's share of a parallel loop.
#include <benchmark/benchmark.h>

#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "kernels/geglu.h"

namespace tandem {
namespace {

constexpr int64_t kDff = 9216, kVocab = 256000, kHeadDim = 256, kGroup = 2, kKvHeads = 4;

std::vector<float> random_floats(size_t n, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-spread, spread);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

void set_elements(benchmark::State& state, int64_t n) {
  state.counters["elements"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::OneK::kIs1000);
}

// gate values over [-4, 4]: GELU's curved part, where neither tail shortcut applies.
void BM_geglu(benchmark::State& state) {
  const std::vector<float> gate = random_floats(kDff, 1, 4.0f), up = random_floats(kDff, 2, 1.0f);
  std::vector<float> out(kDff);
  for (auto _ : state) {
    geglu_row(gate.data(), up.data(), kDff, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_elements(state, kDff);
}
BENCHMARK(BM_geglu);

// n logits over [-40, 40] capped at 30: 4096 (one attention tile row's worth) and a whole
// gemma vocabulary row.
void BM_softcap(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> x = random_floats(static_cast<size_t>(n), 3, 40.0f);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    softcap_row(x.data(), n, 30.0f, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_elements(state, n);
}
BENCHMARK(BM_softcap)->Arg(4096)->Arg(kVocab);

// One decode token's group of 2 query heads over n_ctx = 4096 positions of one KV head,
// cap 0 (none) or 50. Queries scaled so that scores reach tens, where the cap bends them.
void BM_attention_softcap(benchmark::State& state) {
  const int64_t n_ctx = state.range(0);
  const auto cap = static_cast<float>(state.range(1));
  const int64_t kv_width = kKvHeads * kHeadDim;
  const std::vector<float> q = random_floats(static_cast<size_t>(kGroup * kHeadDim), 4, 30.0f);  // [group, head_dim]
  const std::vector<float> keys = random_floats(static_cast<size_t>(n_ctx * kv_width), 5, 1.0f);    // [n_ctx, kv_width]
  const std::vector<float> values = random_floats(static_cast<size_t>(n_ctx * kv_width), 6, 1.0f);  // [n_ctx, kv_width]
  std::vector<int32_t> slots(static_cast<size_t>(n_ctx));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(kGroup)));
  std::vector<float> out(static_cast<size_t>(kGroup * kHeadDim));
  for (auto _ : state) {
    attention_group(q.data(), kGroup, f32_kv_rows(keys.data(), kv_width), f32_kv_rows(values.data(), kv_width),
                    /*kv_offset=*/kHeadDim, slots.data(), n_ctx, kHeadDim, scratch.data(), out.data(), cap);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_elements(state, n_ctx * kGroup);  // scores
}
BENCHMARK(BM_attention_softcap)->ArgNames({"n_ctx", "cap"})->ArgsProduct({{4096}, {0, 50}});

}  // namespace
}  // namespace tandem
