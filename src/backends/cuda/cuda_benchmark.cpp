// tandem bench on the device (cuda_benchmark.h). One CudaForward for every test, its KV pool
// sized for the largest; each sequence of a test takes its own run of blocks.
#include "backends/cuda/cuda_benchmark.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "backends/cuda/cuda_forward.h"
#include "base/error.h"

namespace tandem::cuda {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int32_t kBlockSize = 16;

int64_t blocks_for(int64_t positions) { return (positions + kBlockSize - 1) / kBlockSize; }

std::vector<int32_t> block_run(int64_t first, int64_t count) {
  std::vector<int32_t> blocks(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) blocks[static_cast<size_t>(b)] = static_cast<int32_t>(first + b);
  return blocks;
}

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

class DeviceBench {
 public:
  DeviceBench(std::shared_ptr<const Model> model, const BenchOptions& options, int64_t max_batch, int64_t kv_blocks)
      : model_(model),
        options_(options),
        forward_(model, {.max_batch_tokens = max_batch,
                         .kv_blocks = kv_blocks,
                         .block_size = kBlockSize,
                         .kv_type = options.kv_types.k}) {}

  BenchResult prefill(int64_t n_prompt) {
    BenchResult result = named("pp" + std::to_string(n_prompt), n_prompt, 0);
    const std::vector<int32_t> prompt = bench_prompt(n_prompt, model_->config.vocab_size, options_.seed);
    Batch batch;
    const int32_t seq = batch.add_sequence(block_run(0, blocks_for(n_prompt)));
    for (int64_t i = 0; i < n_prompt; ++i)
      batch.add(prompt[static_cast<size_t>(i)], static_cast<int32_t>(i), seq, i == n_prompt - 1);
    for (int rep = 0; rep <= options_.repetitions; ++rep) {  // rep 0 is the warm-up
      const Clock::time_point start = Clock::now();
      forward_.run(batch);
      if (rep > 0) result.samples.push_back(static_cast<double>(n_prompt) / seconds_since(start));
    }
    result.kv_bytes = n_prompt * bytes_per_token();
    return finished(result);
  }

  // n_seqs sequences each prefilled with decode_prefill tokens (untimed), then n_gen steps of
  // one greedy token per sequence.
  BenchResult decode(int64_t n_gen, int64_t n_seqs, const std::string& name) {
    const int64_t n_prefill = options_.decode_prefill, seq_blocks = blocks_for(n_prefill + n_gen);
    BenchResult result = named(name, n_prefill, n_gen);
    const std::vector<int32_t> prompt = bench_prompt(n_prefill, model_->config.vocab_size, options_.seed);
    const int64_t vocab = model_->config.vocab_size;
    for (int rep = 0; rep <= options_.repetitions; ++rep) {
      const int64_t steps = rep == 0 ? std::min<int64_t>(n_gen, 8) : n_gen;
      std::vector<int32_t> next(static_cast<size_t>(n_seqs));
      for (int64_t s = 0; s < n_seqs; ++s) {  // one prefill per sequence: the batch limit is max_batch
        Batch batch;
        const int32_t seq = batch.add_sequence(block_run(s * seq_blocks, seq_blocks));
        for (int64_t i = 0; i < n_prefill; ++i)
          batch.add(prompt[static_cast<size_t>(i)], static_cast<int32_t>(i), seq, i == n_prefill - 1);
        next[static_cast<size_t>(s)] = argmax(forward_.run(batch).data(), vocab);
      }
      const Clock::time_point start = Clock::now();
      for (int64_t step = 0; step < steps; ++step) {
        Batch batch;
        for (int64_t s = 0; s < n_seqs; ++s) {
          const int32_t seq = batch.add_sequence(block_run(s * seq_blocks, seq_blocks));
          batch.add(next[static_cast<size_t>(s)], static_cast<int32_t>(n_prefill + step), seq, true);
        }
        const std::span<const float> logits = forward_.run(batch);
        for (int64_t s = 0; s < n_seqs; ++s) next[static_cast<size_t>(s)] = argmax(logits.data() + s * vocab, vocab);
      }
      if (rep > 0) result.samples.push_back(static_cast<double>(steps * n_seqs) / seconds_since(start));
    }
    result.kv_bytes = n_seqs * (n_prefill + n_gen) * bytes_per_token();
    return finished(result);
  }

  const std::string& graphs_off_reason() const { return forward_.graphs_off_reason(); }

 private:
  static double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  int64_t bytes_per_token() const {
    const ModelConfig& c = model_->config;
    return 2 * c.n_layers * dtype_row_bytes(options_.kv_types.k, c.kv_width());
  }
  BenchResult named(const std::string& test, int64_t n_prompt, int64_t n_gen) const {
    BenchResult result;
    result.test = test;
    result.n_prompt = n_prompt;
    result.n_gen = n_gen;
    result.threads = options_.threads;
    return result;
  }
  static BenchResult finished(BenchResult result) {
    result.peak_rss_bytes = peak_rss_bytes();
    return result;
  }

  std::shared_ptr<const Model> model_;
  BenchOptions options_;
  CudaForward forward_;
};

}  // namespace

std::vector<BenchResult> run_cuda_benchmark(std::shared_ptr<const Model> model, const BenchOptions& options,
                                            const std::vector<int64_t>& decode_batches,
                                            const std::function<void(const BenchResult&)>& on_result) {
  TANDEM_CHECK_INPUT(options.kv_types.k == options.kv_types.v &&
                         (options.kv_types.k == DType::F16 || options.kv_types.k == DType::F32),
                     "--device cuda keeps K and V in f16 or f32 (the --kv-type flags)");
  const int64_t context = model->config.context_length;
  int64_t max_batch = std::max<int64_t>(1, options.decode_prefill), kv_blocks = 1;
  for (int64_t n : options.prompt_lengths) {
    TANDEM_CHECK_INPUT(n <= context, "pp{} does not fit the model's context of {}", n, context);
    max_batch = std::max(max_batch, n);
    kv_blocks = std::max(kv_blocks, blocks_for(n));
  }
  int64_t widest = options.n_gen > 0 ? 1 : 0;
  for (int64_t b : decode_batches) {
    TANDEM_CHECK_INPUT(b >= 1, "a decode batch of {} sequences", b);
    widest = std::max(widest, b);
  }
  if (widest > 0) {
    TANDEM_CHECK_INPUT(options.decode_prefill + options.n_gen <= context,
                       "tg{} after a {}-token prefill does not fit the model's context of {}", options.n_gen,
                       options.decode_prefill, context);
    max_batch = std::max(max_batch, widest);
    kv_blocks = std::max(kv_blocks, widest * blocks_for(options.decode_prefill + options.n_gen));
  }
  DeviceBench bench(model, options, max_batch, kv_blocks);
  std::vector<BenchResult> results;
  auto record = [&](BenchResult result) {
    if (on_result) on_result(result);
    results.push_back(std::move(result));
  };
  for (int64_t n : options.prompt_lengths)
    if (n > 0) record(bench.prefill(n));
  if (options.n_gen > 0) {
    record(bench.decode(options.n_gen, 1, "tg" + std::to_string(options.n_gen)));
    for (int64_t b : decode_batches)
      record(bench.decode(options.n_gen, b, "tg" + std::to_string(options.n_gen) + "-b" + std::to_string(b)));
  }
  // The numbers above are then of plain launches: say so, or they read as graphs' numbers.
  if (!bench.graphs_off_reason().empty())
    fmt::print(stderr, "tandem bench: CUDA graphs went off, plain launches measured: {}\n", bench.graphs_off_reason());
  return results;
}

}  // namespace tandem::cuda
