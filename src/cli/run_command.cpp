// tandem run: load a model, encode the prompt, prefill, decode and stream the text (or the
// ids with --ids) to stdout; the timing summary goes to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/commands.h"
#include "engine/generation.h"
#include "model/model.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/streaming_detokenizer.h"

namespace tandem::cli {
namespace {

struct RunOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string prompt;
  int64_t max_new_tokens = 256;
  SamplingParams sampling;
  int64_t seed = -1;
  int threads = 0;
  bool print_ids = false;
};

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

void print_timings(double load_ms, const GenerationResult& result, int64_t kv_bytes_per_token) {
  const GenerationTimings& t = result.timings;
  const auto per_second = [](int64_t tokens, double ms) { return ms > 0 ? tokens * 1000.0 / ms : 0.0; };
  const int64_t decoded = static_cast<int64_t>(t.step_ms.size());
  std::fprintf(stderr, "\n\nload:    %.2f ms\n", load_ms);
  std::fprintf(stderr, "prefill: %lld prompt tokens in %.2f ms (%.1f tokens/s)\n",
               static_cast<long long>(t.prompt_tokens), t.prefill_ms, per_second(t.prompt_tokens, t.prefill_ms));
  std::fprintf(stderr, "TTFT:    %.2f ms\n", t.ttft_ms);
  std::fprintf(stderr, "decode:  %lld tokens generated; %lld decode steps in %.2f ms (%.1f tokens/s)\n",
               static_cast<long long>(t.generated_tokens), static_cast<long long>(decoded), t.decode_ms,
               per_second(decoded, t.decode_ms));
  const double mean = decoded > 0 ? t.decode_ms / static_cast<double>(decoded) : 0.0;
  std::fprintf(stderr, "TPOT:    mean %.3f ms, p50 %.3f ms, p99 %.3f ms\n", mean, percentile(t.step_ms, 0.5),
               percentile(t.step_ms, 0.99));
  std::fprintf(stderr, "KV cache: %lld bytes in use (%lld tokens x %lld bytes/token)\n",
               static_cast<long long>(t.kv_bytes_in_use), static_cast<long long>(t.kv_bytes_in_use / kv_bytes_per_token),
               static_cast<long long>(kv_bytes_per_token));
  std::fprintf(stderr, "stop:    %s\n", std::string(stop_reason_name(result.stop_reason)).c_str());
}

void run(const RunOptions& options) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point load_start = Clock::now();
  std::shared_ptr<const Model> model = load_model(options.model_path);
  const Tokenizer tokenizer = load_tokenizer(options.model_path, options.tokenizer_path, model->config.vocab_size);
  TANDEM_CHECK_INPUT(tokenizer.vocab().size() == model->config.vocab_size,
                     "the tokenizer has {} tokens but the model's vocabulary is {}", tokenizer.vocab().size(),
                     model->config.vocab_size);
  ThreadPool pool(options.threads);
  const std::vector<int32_t> prompt = tokenizer.encode(options.prompt, tokenizer.vocab().add_bos);  // gpt-2 style vocabularies add none
  const ModelConfig& config = model->config;
  TANDEM_CHECK_INPUT(static_cast<int64_t>(prompt.size()) <= config.context_length,
                     "the prompt is {} tokens long but the model's context is {} tokens", prompt.size(),
                     config.context_length);
  Forward forward(model, std::max<int64_t>(1, static_cast<int64_t>(prompt.size())), pool);
  KvCache cache(config.kv_shape(), config.context_length, 1);
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();

  SamplingParams sampling = options.sampling;
  sampling.seed = options.seed >= 0 ? static_cast<uint64_t>(options.seed) : std::random_device{}();
  Sampler sampler(sampling, config.vocab_size);

  StreamingDetokenizer detokenizer(tokenizer);
  for (int32_t id : prompt) detokenizer.push(id);  // context for the space rule; the prompt is echoed as typed
  if (!options.print_ids) {
    std::fputs(options.prompt.c_str(), stdout);
    std::fflush(stdout);
  }
  const int32_t eos = tokenizer.vocab().eos_id;
  const GenerationResult result =
      generate(forward, cache, sampler, prompt, options.max_new_tokens, eos, 0, [&](int32_t token) {
        if (options.print_ids || token == eos) return;
        std::fputs(detokenizer.push(token).c_str(), stdout);
        std::fflush(stdout);
      });
  if (options.print_ids) {
    for (size_t i = 0; i < result.tokens.size(); ++i) std::printf(i ? " %d" : "%d", result.tokens[i]);
    std::printf("\n");
    std::fflush(stdout);
  } else {
    std::fputs(detokenizer.finish().c_str(), stdout);
    std::fflush(stdout);
  }
  std::fprintf(stderr, "seed:    %llu\n", static_cast<unsigned long long>(sampling.seed));
  print_timings(load_ms, result, cache.bytes_per_token());
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand("run", "Generate text from a prompt, streamed to stdout");
  command->add_option("-m,--model", options->model_path, "Model file (.gguf or llama2.c model.bin)")->required();
  command->add_option("-z,--tokenizer", options->tokenizer_path, "Tokenizer for llama2.c models (tokenizer.bin)");
  command->add_option("-p,--prompt", options->prompt, "Prompt text");
  command->add_option("-n,--n-predict", options->max_new_tokens, "Tokens to generate at most")->check(CLI::NonNegativeNumber);
  command->add_option("--temp", options->sampling.temperature, "Temperature (0: greedy)")->capture_default_str();
  command->add_option("--top-k", options->sampling.top_k, "Top-k (0: off)")->capture_default_str();
  command->add_option("--top-p", options->sampling.top_p, "Top-p (1: off)")->capture_default_str();
  command->add_option("--min-p", options->sampling.min_p, "Min-p (0: off)")->capture_default_str();
  command->add_option("--repeat-penalty", options->sampling.repetition_penalty, "Repetition penalty (1: off)")
      ->capture_default_str();
  command->add_option("--repeat-last-n", options->sampling.repeat_last_n, "Tokens the penalty looks back over")
      ->capture_default_str();
  command->add_option("-s,--seed", options->seed, "Random seed (default: random)");
  command->add_option("-t,--threads", options->threads, "Threads (default: all cores)");
  command->add_flag("--ids", options->print_ids, "Print the whole token id sequence instead of text");
  command->callback([options] { run(*options); });
}

}  // namespace tandem::cli
