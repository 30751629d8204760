// tandem run: load a model, encode the prompt, prefill, decode and stream the text (or the
// ids with --ids) to stdout; the timing summary goes to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "base/error.h"
#include "base/thread_pool.h"
#include "cli/commands.h"
#include "engine/engine.h"
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

const char* stop_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndOfSequence: return "end of sequence";
    case FinishReason::Length: return "token limit";
    case FinishReason::ContextLimit: return "context limit";
    case FinishReason::StopString: return "stop string";
    case FinishReason::Cancelled: return "cancelled";
    default: return "error";
  }
}

// The timing summary, from the engine's per-request timings (what /metrics aggregates).
void print_timings(double load_ms, const RequestEvent& done, int64_t kv_bytes_per_token) {
  const auto per_second = [](int64_t tokens, double ms) { return ms > 0 ? tokens * 1000.0 / ms : 0.0; };
  const auto decoded = static_cast<int64_t>(done.itl_ms.size());
  std::fprintf(stderr, "\n\nload:    %.2f ms\n", load_ms);
  std::fprintf(stderr, "prefill: %lld prompt tokens in %.2f ms (%.1f tokens/s)\n",
               static_cast<long long>(done.prompt_tokens), done.prefill_ms,
               per_second(done.prompt_tokens, done.prefill_ms));
  std::fprintf(stderr, "TTFT:    %.2f ms\n", done.ttft_ms);
  std::fprintf(stderr, "decode:  %lld tokens generated; %lld decode steps in %.2f ms (%.1f tokens/s)\n",
               static_cast<long long>(done.completion_tokens), static_cast<long long>(decoded), done.decode_ms,
               per_second(decoded, done.decode_ms));
  const double mean = decoded > 0 ? done.decode_ms / static_cast<double>(decoded) : 0.0;
  std::fprintf(stderr, "TPOT:    mean %.3f ms, p50 %.3f ms, p99 %.3f ms\n", mean, percentile(done.itl_ms, 0.5),
               percentile(done.itl_ms, 0.99));
  std::fprintf(stderr, "KV cache: %lld bytes in use (%lld token slots x %lld bytes/token)\n",
               static_cast<long long>(done.kv_bytes), static_cast<long long>(done.kv_bytes / kv_bytes_per_token),
               static_cast<long long>(kv_bytes_per_token));
  std::fprintf(stderr, "stop:    %s\n", stop_name(done.finish_reason));
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
  TANDEM_CHECK_INPUT(!prompt.empty(), "the prompt is empty (no tokens)");
  TANDEM_CHECK_INPUT(static_cast<int64_t>(prompt.size()) <= config.context_length,
                     "the prompt is {} tokens long but the model's context is {} tokens", prompt.size(),
                     config.context_length);
  // A batch of one: the whole prompt in one forward pass (scratch sized for exactly it), a
  // KV pool of one full context.
  EngineConfig engine_config;
  engine_config.max_seqs = 1;
  engine_config.max_batch_tokens = static_cast<int64_t>(prompt.size());
  Engine engine(model, tokenizer, engine_config, pool);
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();

  GenerationParams params;
  params.sampling = options.sampling;
  params.sampling.seed = options.seed >= 0 ? static_cast<uint64_t>(options.seed) : std::random_device{}();
  if (options.max_new_tokens == 0) {  // nothing to generate: the engine takes max_tokens >= 1
    if (!options.print_ids) std::fputs(options.prompt.c_str(), stdout);
    else for (size_t i = 0; i < prompt.size(); ++i) std::printf(i ? " %d" : "%d", prompt[i]);
    std::printf("\n");
    return;
  }
  params.max_tokens = options.max_new_tokens;

  if (!options.print_ids) {
    std::fputs(options.prompt.c_str(), stdout);  // the prompt is echoed as typed
    std::fflush(stdout);
  }
  std::vector<int32_t> generated;
  RequestEvent done;
  engine.submit(prompt, params, [&](RequestEvent&& event) {
    generated.insert(generated.end(), event.tokens.begin(), event.tokens.end());
    if (!options.print_ids && !event.text.empty()) {
      std::fputs(event.text.c_str(), stdout);
      std::fflush(stdout);
    }
    if (event.finished) done = std::move(event);
  });
  engine.run_until_idle();
  if (options.print_ids) {
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), generated.begin(), generated.end());
    for (size_t i = 0; i < all.size(); ++i) std::printf(i ? " %d" : "%d", all[i]);
    std::printf("\n");
    std::fflush(stdout);
  }
  std::fprintf(stderr, "seed:    %llu\n", static_cast<unsigned long long>(params.sampling.seed));
  print_timings(load_ms, done, KvCache::bytes_per_token(config.kv_shape()));
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
