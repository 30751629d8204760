// Benchmark: llama-bench-style throughput measurement of one model — prefill (ppN: one
// forward pass of exactly N tokens into a fresh KV cache) and decode (tgN: N greedy steps of
// one token each, through the Engine) — as tokens/s per repetition, plus the memory figures the targets name
// (peak RSS, file size, KV bytes). Measuring only: printing and flags live in cli/bench.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/thread_pool.h"
#include "kv/kv_types.h"
#include "model/forward.h"
#include "model/model.h"
#include "profile/profiler.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

struct BenchOptions {
  std::vector<int64_t> prompt_lengths{128, 512};  // one ppN test each; 0 entries are skipped
  int64_t n_gen = 128;                            // tgN test; 0 skips it
  // Decode runs after a prefill of this many tokens (BOS + ids), untimed, so the timed steps
  // attend over a short history as llama.cpp's decode after a prompt does.
  int64_t decode_prefill = 16;
  int threads = 2;                     // the CLI passes ThreadPool::default_size() unless -t says otherwise
  int repetitions = 5;                 // timed runs per test; one extra warm-up run is never counted
  uint64_t seed = 42;                  // of the pseudo-random prompt ids
  KvTypes kv_types = kDefaultKvTypes;  // what both tests' KV caches store K and V in
  // Records the timed repetitions' ops (never the warm-ups); null: off. With tracing on, the
  // benchmark's pool reports its chunks to it.
  Profiler* profiler = nullptr;
  // Called after each run of a test ("pp512", 0 for the warm-up, then 1..repetitions), so a
  // long test can show progress (tandem bench on a terminal); empty: nothing.
  std::function<void(const std::string& test, int run, int repetitions)> on_run;
};

struct BenchResult {
  std::string test;      // "pp512", "tg128"
  int64_t n_prompt = 0;  // prompt tokens (for tg: the untimed prefill before decoding)
  int64_t n_gen = 0;     // generated tokens (0 for pp)
  int threads = 0;
  std::vector<double> samples;  // tokens/s, one per timed repetition
  int64_t kv_bytes = 0;         // KV cache bytes holding the test's tokens at its end
  int64_t peak_rss_bytes = 0;   // VmHWM of the process after the test

  double median() const;
  double stddev() const;  // sample standard deviation (0 with one sample)
};

// What the table header and the JSON lines say about the model.
struct BenchModelInfo {
  std::string path;
  std::string type;  // the type of most weight bytes ("Q8_0", ...)
  int64_t file_bytes = 0;
  int64_t n_params = 0;  // elements of all weight tensors (tied head counted once)
  int64_t weight_bytes_per_token = 0;
  KvTypes kv_types;  // the KV cache types the tests ran with (BenchOptions::kv_types)
};

BenchModelInfo describe_model(const Model& model);

// Peak resident set size of this process (VmHWM), 0 when /proc is unavailable.
int64_t peak_rss_bytes();

// Prompt token ids: BOS (id 1, the Llama convention) then pseudo-random ids from `seed`.
std::vector<int32_t> bench_prompt(int64_t n_tokens, int64_t vocab_size, uint64_t seed);

class Benchmark {
 public:
  // Throws InputError when a test does not fit the model's context.
  Benchmark(std::shared_ptr<const Model> model, const BenchOptions& options);

  BenchResult run_prefill(int64_t n_prompt);
  BenchResult run_decode(int64_t n_gen);
  // Every test the options ask for, pp first then tg; on_result sees each as it finishes.
  std::vector<BenchResult> run_all(const std::function<void(const BenchResult&)>& on_result = {});

 private:
  std::shared_ptr<const Model> model_;
  BenchOptions options_;
  ThreadPool pool_;
  Forward forward_;            // the prefill tests' (one forward pass each)
  Tokenizer bench_tokenizer_;  // the decode test's engine detokenizes with it
};

// The JSON line of one test: {"test", "n_prompt", "n_gen", "threads", "tokens_per_s",
// "samples", "stddev", "peak_rss_bytes", "kv_bytes", "model", "type", "model_size_bytes",
// "n_params"}.
nlohmann::ordered_json bench_result_json(const BenchResult& result, const BenchModelInfo& info);

}  // namespace tandem
