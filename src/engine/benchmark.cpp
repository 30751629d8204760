// Benchmark: times prefill (Forward::run over the whole prompt, as llama-bench does) and
// greedy decode (through the Engine, the one generation loop every command uses: a batch of
// one request, its decode time the engine's own first-to-last-token timing).
#include "engine/benchmark.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "base/error.h"
#include "engine/engine.h"
#include "engine/private_kv_pool.h"

namespace tandem {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// The decode test needs a vocabulary only for the engine's detokenizer (EOS is ignored and
// the text unused), so any placeholder of the right size does; a real one would tie the
// benchmark to model files that carry their vocabulary.
Tokenizer placeholder_tokenizer(int64_t vocab_size) {
  Vocab vocab;
  for (int64_t i = 0; i < vocab_size; ++i) {
    vocab.pieces.push_back("<t" + std::to_string(i) + ">");
    vocab.scores.push_back(0.0f);
    vocab.types.push_back(TokenType::Normal);
  }
  vocab.bos_id = vocab.eos_id = vocab.unk_id = -1;
  return Tokenizer(std::move(vocab));
}

// Forward's scratch is sized once for the largest batch any test runs; checks the context
// first so a too-long prompt fails with a clear message before anything is allocated.
int64_t checked_max_batch(const Model& model, const BenchOptions& options) {
  const int64_t context = model.config.context_length;
  TANDEM_CHECK_INPUT(options.repetitions >= 1, "repetitions must be at least 1 (got {})", options.repetitions);
  TANDEM_CHECK_INPUT(options.threads >= 1, "threads must be at least 1 (got {})", options.threads);
  int64_t max_batch = 1;
  for (int64_t n : options.prompt_lengths) {
    TANDEM_CHECK_INPUT(n >= 0, "prompt length {} is negative", n);
    TANDEM_CHECK_INPUT(n <= context, "prompt length {} exceeds the model's context of {} tokens", n, context);
    max_batch = std::max(max_batch, n);
  }
  TANDEM_CHECK_INPUT(options.n_gen >= 0, "generation length {} is negative", options.n_gen);
  if (options.n_gen > 0) {
    TANDEM_CHECK_INPUT(options.decode_prefill >= 1, "the decode prefill must be at least 1 token");
    TANDEM_CHECK_INPUT(options.decode_prefill + options.n_gen <= context,
                       "decode test needs {} + {} positions but the model's context is {} tokens",
                       options.decode_prefill, options.n_gen, context);
    max_batch = std::max(max_batch, options.decode_prefill);
  }
  return max_batch;
}

}  // namespace

double BenchResult::median() const {
  if (samples.empty()) return 0.0;
  std::vector<double> sorted = samples;
  std::sort(sorted.begin(), sorted.end());
  const size_t mid = sorted.size() / 2;
  return sorted.size() % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2.0;
}

double BenchResult::stddev() const {
  if (samples.size() < 2) return 0.0;
  double mean = 0.0;
  for (double x : samples) mean += x;
  mean /= static_cast<double>(samples.size());
  double sum_squares = 0.0;
  for (double x : samples) sum_squares += (x - mean) * (x - mean);
  return std::sqrt(sum_squares / static_cast<double>(samples.size() - 1));
}

BenchModelInfo describe_model(const Model& model) {
  BenchModelInfo info;
  info.path = model.source_path;
  std::error_code error;
  const auto size = std::filesystem::file_size(model.source_path, error);
  info.file_bytes = error ? 0 : static_cast<int64_t>(size);
  info.weight_bytes_per_token = model.weight_bytes_per_token();

  std::map<DType, int64_t> bytes_by_type;
  auto count = [&](const TensorView& view) {
    info.n_params += view.n_elements();
    bytes_by_type[view.dtype] += view.n_bytes();
  };
  const ModelWeights& w = model.weights;
  count(w.token_embedding);
  count(w.output_norm);
  if (w.output.data != w.token_embedding.data) count(w.output);
  for (const LayerWeights& layer : w.layers) {
    for (const TensorView* view : {&layer.attn_norm, &layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.ffn_norm,
                                   &layer.w_gate, &layer.w_up, &layer.w_down, &layer.router})
      if (view->data != nullptr) count(*view);  // a layer with experts has no dense FFN
    for (const std::vector<TensorView>* experts : {&layer.expert_gate, &layer.expert_up, &layer.expert_down})
      for (const TensorView& view : *experts) count(view);
  }
  const auto largest = std::max_element(bytes_by_type.begin(), bytes_by_type.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
  info.type = largest == bytes_by_type.end() ? "?" : std::string(dtype_name(largest->first));
  return info;
}

int64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

std::vector<int32_t> bench_prompt(int64_t n_tokens, int64_t vocab_size, uint64_t seed) {
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(n_tokens));
  // Ids 0..2 are unk/BOS/EOS in Llama vocabularies; the rest are ordinary tokens.
  const int32_t first = vocab_size > 3 ? 3 : 0;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(first, static_cast<int32_t>(vocab_size - 1));
  for (int64_t i = 0; i < n_tokens; ++i) tokens.push_back(i == 0 && vocab_size > 1 ? 1 : pick(rng));
  return tokens;
}

Benchmark::Benchmark(std::shared_ptr<const Model> model, const BenchOptions& options)
    : model_(model),
      options_(options),
      pool_(options.threads),
      forward_(model, checked_max_batch(*model, options), pool_),
      bench_tokenizer_(placeholder_tokenizer(model->config.vocab_size)) {
  if (options_.profiler != nullptr && options_.profiler->tracing()) pool_.set_chunk_observer(options_.profiler);
}

BenchResult Benchmark::run_prefill(int64_t n_prompt) {
  const ModelConfig& config = model_->config;
  BenchResult result;
  result.test = "pp" + std::to_string(n_prompt);
  result.n_prompt = n_prompt;
  result.threads = options_.threads;

  const std::vector<int32_t> prompt = bench_prompt(n_prompt, config.vocab_size, options_.seed);
  Batch batch;  // one sequence, id 0, holding the whole (test-sized) pool
  for (int64_t i = 0; i < n_prompt; ++i)
    batch.add(prompt[static_cast<size_t>(i)], static_cast<int32_t>(i), 0, i == n_prompt - 1);
  // Sized to the test, so peak RSS reflects what this test needs, not the full context.
  KvCache cache = make_private_kv_pool(config, n_prompt, options_.kv_types);
  batch.add_sequence(cache.whole_pool_blocks());
  if (options_.profiler != nullptr) options_.profiler->record_phases(true, false);
  // The warm-up (rep 0) only pages the weights in and starts the threads: the prompt's first
  // 512 tokens do that (a full-length warm-up doubled a 16k-token test's minutes for nothing).
  constexpr int64_t kWarmupTokens = 512;
  Batch warmup;
  const int64_t n_warmup = std::min(n_prompt, kWarmupTokens);
  for (int64_t i = 0; i < n_warmup; ++i)
    warmup.add(prompt[static_cast<size_t>(i)], static_cast<int32_t>(i), 0, i == n_warmup - 1);
  warmup.add_sequence(cache.whole_pool_blocks());
  for (int rep = 0; rep <= options_.repetitions; ++rep) {  // rep 0 is the warm-up
    forward_.set_profiler(rep > 0 ? options_.profiler : nullptr);
    const Clock::time_point start = Clock::now();
    forward_.run(rep > 0 ? batch : warmup, cache);
    const double elapsed = seconds_since(start);
    if (rep > 0) result.samples.push_back(static_cast<double>(n_prompt) / elapsed);
    if (options_.on_run) options_.on_run(result.test, rep, options_.repetitions);
  }
  forward_.set_profiler(nullptr);
  if (options_.profiler != nullptr) options_.profiler->record_phases(true, true);
  result.kv_bytes = n_prompt * cache.bytes_per_token();
  result.peak_rss_bytes = peak_rss_bytes();
  return result;
}

BenchResult Benchmark::run_decode(int64_t n_gen) {
  const int64_t n_prefill = options_.decode_prefill;
  BenchResult result;
  result.test = "tg" + std::to_string(n_gen);
  result.n_prompt = n_prefill;
  result.n_gen = n_gen;
  result.threads = options_.threads;

  EngineConfig config;
  config.max_seqs = 1;
  config.max_batch_tokens = n_prefill;
  config.context_length = n_prefill + n_gen;  // checked against the model's at construction
  config.kv_types = options_.kv_types;
  Engine engine(model_, bench_tokenizer_, config, pool_);
  const std::vector<int32_t> prompt = bench_prompt(n_prefill, model_->config.vocab_size, options_.seed);
  // The profile of a tg test is its decode steps, not the untimed prefill before them.
  if (options_.profiler != nullptr) options_.profiler->record_phases(false, true);
  for (int rep = 0; rep <= options_.repetitions; ++rep) {
    // The warm-up only needs to page the weights in and warm the caches: a few steps do.
    const int64_t steps = rep == 0 ? std::min<int64_t>(n_gen, 8) : n_gen;
    engine.set_profiler(rep > 0 ? options_.profiler : nullptr);
    GenerationParams params;
    params.sampling.temperature = 0.0f;  // greedy, as llama-bench's argmax
    params.max_tokens = steps + 1;       // the first token comes from the (untimed) prefill
    params.ignore_eos = true;
    RequestEvent last;
    engine.submit(prompt, params, [&](RequestEvent&& event) {
      if (event.finished) last = std::move(event);
    });
    engine.run_until_idle();
    TANDEM_ASSERT(last.finished && last.completion_tokens == steps + 1);
    // decode_ms runs from the first token to the last: exactly `steps` decode steps.
    if (rep > 0) result.samples.push_back(static_cast<double>(steps) / (last.decode_ms / 1000.0));
    result.kv_bytes = last.kv_bytes;
    if (options_.on_run) options_.on_run(result.test, rep, options_.repetitions);
  }
  engine.set_profiler(nullptr);
  if (options_.profiler != nullptr) options_.profiler->record_phases(true, true);
  result.peak_rss_bytes = peak_rss_bytes();
  return result;
}

std::vector<BenchResult> Benchmark::run_all(const std::function<void(const BenchResult&)>& on_result) {
  std::vector<BenchResult> results;
  auto record = [&](BenchResult result) {
    if (on_result) on_result(result);
    results.push_back(std::move(result));
  };
  for (int64_t n : options_.prompt_lengths)
    if (n > 0) record(run_prefill(n));
  if (options_.n_gen > 0) record(run_decode(options_.n_gen));
  return results;
}

nlohmann::ordered_json bench_result_json(const BenchResult& result, const BenchModelInfo& info) {
  return nlohmann::ordered_json{{"test", result.test},
                                {"n_prompt", result.n_prompt},
                                {"n_gen", result.n_gen},
                                {"threads", result.threads},
                                {"tokens_per_s", result.median()},
                                {"stddev", result.stddev()},
                                {"samples", result.samples},
                                {"peak_rss_bytes", result.peak_rss_bytes},
                                {"kv_bytes", result.kv_bytes},
                                {"type_k", kv_type_name(info.kv_types.k)},
                                {"type_v", kv_type_name(info.kv_types.v)},
                                {"model", info.path},
                                {"type", info.type},
                                {"model_size_bytes", info.file_bytes},
                                {"n_params", info.n_params},
                                {"weight_bytes_per_token", info.weight_bytes_per_token}};
}

}  // namespace tandem
