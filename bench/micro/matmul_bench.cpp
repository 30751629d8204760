// Google Benchmark of matmul (src/kernels/matmul.h) for every computable weight type (packed
// for the AMX level when that is the active one, as the loader does) on
// tinyllama-1.1b's shapes: decode (1 token) and prefill (64, 512 tokens). Counters:
// weight_bytes/s (weight bytes read per call / time: compare with tandem_bandwidth in decode)
// and flops/s (2·n_out·n_in·n_tokens / time: compare with the cores' peak in prefill).
// Threads: TANDEM_BENCH_THREADS (default 2).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "base/quant.h"
#include "base/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"

namespace tandem {
namespace {

const DType kTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};

ThreadPool& bench_pool() {
  static ThreadPool pool([] {
    const char* env = std::getenv("TANDEM_BENCH_THREADS");
    return env ? std::atoi(env) : 2;
  }());
  return pool;
}

// Random weights of one (type, shape), quantized once and shared by every benchmark using them.
const std::vector<uint8_t>& weight_bytes(DType type, int64_t n_out, int64_t n_in) {
  static std::map<std::tuple<DType, int64_t, int64_t>, std::vector<uint8_t>> cache;
  auto [it, inserted] = cache.try_emplace({type, n_out, n_in});
  if (inserted) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> row(static_cast<size_t>(n_in));
    const int64_t row_bytes = dtype_row_bytes(type, n_in);
    it->second.resize(static_cast<size_t>(n_out * row_bytes));
    for (int64_t r = 0; r < n_out; ++r) {
      for (float& x : row) x = normal(rng);
      quantize_row(type, row.data(), it->second.data() + r * row_bytes, n_in);
    }
  }
  return it->second;
}

// Args: type index, n_out, n_in, n_tokens.
void BM_matmul(benchmark::State& state) {
  const DType type = kTypes[state.range(0)];
  const int64_t n_out = state.range(1), n_in = state.range(2), n_tokens = state.range(3);
  const std::vector<uint8_t>& bytes = weight_bytes(type, n_out, n_in);
  TensorView weight = make_view(bytes.data(), type, {n_out, n_in});
  const std::vector<uint8_t> packed = pack_for_level(kernel_table(), weight);  // as the model loader does
  std::vector<float> x(static_cast<size_t>(n_tokens * n_in));  // [n_tokens, n_in]
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& v : x) v = uniform(rng);
  std::vector<float> out(static_cast<size_t>(n_tokens * n_out));  // [n_tokens, n_out]
  MatmulScratch scratch;
  ThreadPool& pool = bench_pool();
  for (auto _ : state) {
    matmul(weight, x.data(), n_tokens, out.data(), pool, scratch);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(dtype_name(type)));
  // Rates over wall time (UseRealTime below): the pool's workers do most of the work, and
  // CPU time counts only the calling thread. Shown as e.g. "weight_bytes=12.3G/s".
  state.counters["weight_bytes"] = benchmark::Counter(static_cast<double>(bytes.size()),
                                                      benchmark::Counter::kIsIterationInvariantRate,
                                                      benchmark::Counter::OneK::kIs1000);
  state.counters["flops"] = benchmark::Counter(2.0 * n_out * n_in * n_tokens, benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::OneK::kIs1000);
  state.counters["threads"] = pool.size();
}

void matmul_args(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"type", "n_out", "n_in", "tokens"});
  // tinyllama-1.1b: attention projections (2048x2048) and the FFN's gate/up (5632x2048).
  const std::pair<int64_t, int64_t> shapes[] = {{2048, 2048}, {5632, 2048}};
  for (int64_t type = 0; type < static_cast<int64_t>(std::size(kTypes)); ++type)
    for (auto [n_out, n_in] : shapes)
      for (int64_t tokens : {1, 64, 512}) bench->Args({type, n_out, n_in, tokens});
}

// Short minimum time: each prefill iteration is already tens of milliseconds.
BENCHMARK(BM_matmul)->Apply(matmul_args)->Unit(benchmark::kMillisecond)->MinTime(0.2)->UseRealTime();

}  // namespace
}  // namespace tandem
