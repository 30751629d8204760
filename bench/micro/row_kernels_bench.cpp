// Google Benchmark of the per-row kernels (src/kernels/elementwise.h) and of attention
// (src/kernels/attention.h: one token's group, and one KV head's share of a prefill, token by
// token and in blocks of tokens) at tinyllama-1.1b's sizes (d_model 2048, d_ff 5632, 32 heads
// of 64, 4 KV heads). Counters: bytes/s (read + written) and flops/s, so each can be held
// against the machine's bandwidth and arithmetic rate. Single-threaded: these run inside one
// worker's share of a parallel loop.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "base/quant.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"

namespace tandem {
namespace {

constexpr int64_t kDModel = 2048, kDff = 5632, kHeads = 32, kKvHeads = 4, kHeadDim = 64;

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(n);
  for (float& v : values) v = uniform(rng);
  return values;
}

void set_rates(benchmark::State& state, double bytes, double flops) {
  // Shown as e.g. "bytes=19.5G/s flops=6.5G/s" (powers of 1000). Rates use CPU time here
  // (single-threaded kernels), which is steadier than wall time on a shared machine.
  state.counters["bytes"] =
      benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1000);
  state.counters["flops"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1000);
}

void BM_rmsnorm(benchmark::State& state) {
  const std::vector<float> x = random_floats(kDModel, 1), weight = random_floats(kDModel, 2);
  std::vector<float> out(kDModel);
  for (auto _ : state) {
    rmsnorm_row(x.data(), weight.data(), kDModel, 1e-5f, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_rates(state, 3.0 * kDModel * sizeof(float), 4.0 * kDModel);  // x², sum; scale, weight
}
BENCHMARK(BM_rmsnorm);

void BM_rope(benchmark::State& state) {
  std::vector<float> q = random_floats(kHeads * kHeadDim, 3);  // [n_heads, head_dim]
  std::vector<float> cos_table(kHeadDim / 2), sin_table(kHeadDim / 2);
  rope_angles(100, kHeadDim, 10000.0f, cos_table.data(), sin_table.data());
  for (auto _ : state) {
    rope_apply(q.data(), kHeads, kHeadDim, kHeadDim, cos_table.data(), sin_table.data());
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
  }
  set_rates(state, 2.0 * kHeads * kHeadDim * sizeof(float), 3.0 * kHeads * kHeadDim);  // 6 flops per pair
}
BENCHMARK(BM_rope);

void BM_swiglu(benchmark::State& state) {
  const std::vector<float> gate = random_floats(kDff, 4), up = random_floats(kDff, 5);
  std::vector<float> out(kDff);
  for (auto _ : state) {
    swiglu_row(gate.data(), up.data(), kDff, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_rates(state, 3.0 * kDff * sizeof(float), 5.0 * kDff);  // exp counted as one
}
BENCHMARK(BM_swiglu);

void BM_softmax(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> source = random_floats(static_cast<size_t>(n), 6);
  std::vector<float> x(source);
  for (auto _ : state) {
    state.PauseTiming();  // softmax is in place: restore the input so every call sees the same
    x = source;
    state.ResumeTiming();
    softmax_row(x.data(), n);
    benchmark::DoNotOptimize(x.data());
  }
  set_rates(state, 2.0 * n * sizeof(float), 4.0 * n);
}
BENCHMARK(BM_softmax)->Arg(512)->Arg(32000);

// One token's attention over n_ctx cached positions (decode) for the n_queries query heads
// that share one KV head: 1 (plain multi-head) or 8 (tinyllama's 32 query / 4 KV heads).
void BM_attention_group(benchmark::State& state) {
  const int64_t n_ctx = state.range(0), n_queries = state.range(1);
  const int64_t kv_width = kKvHeads * kHeadDim;
  const std::vector<float> q = random_floats(static_cast<size_t>(n_queries * kHeadDim), 7);   // [n_queries, head_dim]
  const std::vector<float> keys = random_floats(static_cast<size_t>(n_ctx * kv_width), 8);    // [n_slots, kv_width]
  const std::vector<float> values = random_floats(static_cast<size_t>(n_ctx * kv_width), 9);  // [n_slots, kv_width]
  std::vector<int32_t> slots(static_cast<size_t>(n_ctx));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_queries * kHeadDim));
  for (auto _ : state) {
    attention_group(q.data(), n_queries, f32_kv_rows(keys.data(), kv_width), f32_kv_rows(values.data(), kv_width),
                    /*kv_offset=*/kHeadDim, slots.data(), n_ctx, kHeadDim, scratch.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // The KV head's K and V rows are read once for the whole group; q·k and the weighted sum
  // are 2 flops per element per query head.
  set_rates(state, 2.0 * n_ctx * kHeadDim * sizeof(float), 4.0 * n_ctx * kHeadDim * n_queries);
}
BENCHMARK(BM_attention_group)->ArgNames({"n_ctx", "n_queries"})->ArgsProduct({{128, 512, 2048}, {1, 8}});

// BM_attention_group with tinyllama's group of 8 over K/V rows stored as each KV cache type
// (0 f32, 1 f16, 2 bf16, 3 q8_0, 4 q4_0), rows as KvCache lays them out (whole 64-byte lines).
// bytes: the stored bytes of this KV head's rows read.
void BM_attention_kv_type(benchmark::State& state) {
  const int64_t n_ctx = state.range(0), n_queries = 8;
  const DType type =
      std::array{DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}.at(static_cast<size_t>(state.range(1)));
  const int64_t kv_width = kKvHeads * kHeadDim;
  const int64_t row_bytes = (dtype_row_bytes(type, kv_width) + 63) / 64 * 64;
  const std::vector<float> q = random_floats(static_cast<size_t>(n_queries * kHeadDim), 7);
  const std::vector<float> floats = random_floats(static_cast<size_t>(n_ctx * kv_width), 8);
  std::vector<uint8_t> keys(static_cast<size_t>(n_ctx * row_bytes)), values(keys.size());
  for (int64_t s = 0; s < n_ctx; ++s) {
    quantize_row(type, floats.data() + s * kv_width, keys.data() + s * row_bytes, kv_width);
    quantize_row(type, floats.data() + s * kv_width, values.data() + s * row_bytes, kv_width);
  }
  std::vector<int32_t> slots(static_cast<size_t>(n_ctx));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_queries * kHeadDim));
  for (auto _ : state) {
    attention_group(q.data(), n_queries, KvRows{keys.data(), row_bytes, type}, KvRows{values.data(), row_bytes, type},
                    /*kv_offset=*/kHeadDim, slots.data(), n_ctx, kHeadDim, scratch.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_rates(state, 2.0 * n_ctx * static_cast<double>(dtype_row_bytes(type, kHeadDim)),
            4.0 * n_ctx * kHeadDim * n_queries);
}
BENCHMARK(BM_attention_kv_type)->ArgNames({"n_ctx", "type"})->ArgsProduct({{2048}, {0, 1, 2, 3, 4}});

// One KV head's share of an n_tokens prefill: token t attends to positions 0..t, so the
// context lengths run 1..n_tokens and every partial last tile occurs, as in a real prompt.
void BM_attention_prefill(benchmark::State& state) {
  const int64_t n_tokens = state.range(0), n_queries = state.range(1);
  const int64_t kv_width = kKvHeads * kHeadDim;
  const std::vector<float> q = random_floats(static_cast<size_t>(n_tokens * n_queries * kHeadDim), 10);
  const std::vector<float> keys = random_floats(static_cast<size_t>(n_tokens * kv_width), 11);    // [n_slots, kv_width]
  const std::vector<float> values = random_floats(static_cast<size_t>(n_tokens * kv_width), 12);  // [n_slots, kv_width]
  std::vector<int32_t> slots(static_cast<size_t>(n_tokens));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_tokens * n_queries * kHeadDim));
  for (auto _ : state) {
    for (int64_t t = 0; t < n_tokens; ++t)
      attention_group(q.data() + t * n_queries * kHeadDim, n_queries, f32_kv_rows(keys.data(), kv_width),
                      f32_kv_rows(values.data(), kv_width),
                      /*kv_offset=*/kHeadDim, slots.data(), t + 1, kHeadDim, scratch.data(),
                      out.data() + t * n_queries * kHeadDim);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double positions = 0.5 * static_cast<double>(n_tokens) * static_cast<double>(n_tokens + 1);
  set_rates(state, 2.0 * positions * kHeadDim * sizeof(float), 4.0 * positions * kHeadDim * n_queries);
}
BENCHMARK(BM_attention_prefill)->ArgNames({"n_tokens", "n_queries"})->ArgsProduct({{512}, {1, 8}});

// BM_attention_prefill through attention_tokens, block_tokens consecutive tokens per call
// sharing each K/V row loaded (Forward::attention's prefill blocks).
void BM_attention_prefill_tokens(benchmark::State& state) {
  const int64_t n_tokens = state.range(0), n_queries = state.range(1), block_tokens = state.range(2);
  const int64_t kv_width = kKvHeads * kHeadDim, token_width = n_queries * kHeadDim;
  const std::vector<float> q = random_floats(static_cast<size_t>(n_tokens * token_width), 10);
  const std::vector<float> keys = random_floats(static_cast<size_t>(n_tokens * kv_width), 11);    // [n_slots, kv_width]
  const std::vector<float> values = random_floats(static_cast<size_t>(n_tokens * kv_width), 12);  // [n_slots, kv_width]
  std::vector<int32_t> slots(static_cast<size_t>(n_tokens));
  std::iota(slots.begin(), slots.end(), 0);
  std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_tokens * token_width));
  for (auto _ : state) {
    for (int64_t t = 0; t < n_tokens; t += block_tokens)
      attention_tokens(q.data() + t * token_width, token_width, std::min(block_tokens, n_tokens - t), n_queries,
                       positions.data() + t, f32_kv_rows(keys.data(), kv_width), f32_kv_rows(values.data(), kv_width),
                       /*kv_offset=*/kHeadDim, slots.data(), kHeadDim, scratch.data(), out.data() + t * token_width,
                       token_width);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double positions_read = 0.5 * static_cast<double>(n_tokens) * static_cast<double>(n_tokens + 1);
  set_rates(state, 2.0 * positions_read * kHeadDim * sizeof(float), 4.0 * positions_read * kHeadDim * n_queries);
}
BENCHMARK(BM_attention_prefill_tokens)
    ->ArgNames({"n_tokens", "n_queries", "block_tokens"})
    ->ArgsProduct({{512}, {1, 8}, {1, 4, 8, 16}});

}  // namespace
}  // namespace tandem
