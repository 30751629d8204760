// tandem run: load a model, encode the prompt (as typed, or as a chat turn with --system /
// --chat-template), generate and stream the text (or the ids with --ids) to stdout; the
// timing summary goes to stderr (not with --quiet), and with --profile the per-op roofline
// summary, with --trace FILE a Chrome trace. Built on the public C++ API
// (include/tandem/tandem.h), plus the internal hook that runs its engine on a device
// (--device): one engine running this one request, its timings the engine's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>

#include "api/engine_state.h"
#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/compat_options.h"
#include "cli/device_options.h"
#include "cli/grammar_options.h"
#include "cli/kv_type_options.h"
#include "cli/sampling_options.h"
#include "tandem/tandem.h"

namespace tandem::cli {
namespace {

struct RunOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string prompt;
  std::string prompt_file;
  std::optional<std::string> system_prompt;  // set: the prompt is a chat turn
  std::string chat_template;                 // set: the prompt is a chat turn in this template
  bool parse_special = false;
  bool quiet = false;
  int64_t context_length = 0;  // 0: the model's
  int64_t kv_memory_bytes = 0;
  int64_t max_new_tokens = 256;
  api::GenerateOptions sampling;
  int64_t seed = -1;
  int threads = 0;
  bool print_ids = false;
  KvTypeFlags kv_types;
  GrammarFlags grammar;
  std::string speculation;  // empty: draft with --draft-model, else none
  std::string draft_model_path;
  bool profile = false;
  std::string trace_path;
};

api::Speculation speculation_from_flag(const std::string& name) {
  if (name == "ngram") return api::Speculation::Ngram;
  if (name == "draft") return api::Speculation::Draft;
  return api::Speculation::None;  // CLI11's IsMember check admitted only these three
}

void print_timings(double load_ms, const api::Result& result, int64_t kv_bytes_per_token) {
  const api::Timings& t = result.timings;
  const api::Usage& usage = result.usage;
  const auto per_second = [](int64_t tokens, double ms) { return ms > 0 ? tokens * 1000.0 / ms : 0.0; };
  const auto decode_steps = static_cast<int64_t>(t.itl_ms.size());  // every token after the first
  std::fprintf(stderr, "load:    %.2f ms\n", load_ms);
  std::fprintf(stderr, "prefill: %lld prompt tokens in %.2f ms (%.1f tokens/s)\n",
               static_cast<long long>(usage.prompt_tokens), t.prefill_ms,
               per_second(usage.prompt_tokens, t.prefill_ms));
  std::fprintf(stderr, "TTFT:    %.2f ms\n", t.ttft_ms);
  std::fprintf(stderr, "decode:  %lld tokens generated; %lld decode steps in %.2f ms (%.1f tokens/s)\n",
               static_cast<long long>(usage.completion_tokens), static_cast<long long>(decode_steps), t.decode_ms,
               per_second(decode_steps, t.decode_ms));
  std::fprintf(stderr, "TPOT:    mean %.3f ms, p50 %.3f ms, p99 %.3f ms\n", t.tpot_mean_ms(), t.tpot_percentile_ms(0.5),
               t.tpot_percentile_ms(0.99));
  std::fprintf(stderr, "KV cache: %lld bytes in use (%lld tokens x %lld bytes/token)\n",
               static_cast<long long>(usage.kv_bytes), static_cast<long long>(usage.kv_bytes / kv_bytes_per_token),
               static_cast<long long>(kv_bytes_per_token));
  if (usage.drafted_tokens > 0) {
    // Every decode step after the first token yields its kept proposals plus one token.
    const int64_t steps = std::max<int64_t>(1, usage.completion_tokens - 1 - usage.accepted_tokens);
    std::fprintf(stderr,
                 "speculative: %lld of %lld proposed tokens accepted (%.1f %%), mean accepted length %.2f, "
                 "%.2f tokens per decode step\n",
                 static_cast<long long>(usage.accepted_tokens), static_cast<long long>(usage.drafted_tokens),
                 100.0 * static_cast<double>(usage.accepted_tokens) / static_cast<double>(usage.drafted_tokens),
                 static_cast<double>(usage.accepted_tokens) / static_cast<double>(steps),
                 static_cast<double>(usage.completion_tokens - 1) / static_cast<double>(steps));
  }
  std::fprintf(stderr, "stop:    %s\n", api::finish_reason_name(result.finish_reason));
}

std::string read_prompt_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw api::Error("cannot open prompt file " + path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

bool is_chat_turn(const RunOptions& options) { return options.system_prompt || !options.chat_template.empty(); }

// The prompt's ids: a chat turn rendered through the model's (or --chat-template's) template,
// else the text itself, BOS only where the vocabulary uses one, control-token text as the
// control token with --special.
std::vector<int32_t> prompt_ids(const RunOptions& options, const std::string& text, const api::Model& model) {
  if (!is_chat_turn(options)) return model.tokenize(text, true, options.parse_special);
  std::vector<api::ChatMessage> messages;
  if (options.system_prompt) messages.push_back({"system", *options.system_prompt});
  messages.push_back({"user", text});
  return model.tokenize_chat(messages);
}

// device_forward: the engine's forward pass off the CPU (engine_device_forward); null: the CPU.
void run(const RunOptions& options, const DeviceForwardFactory& device_forward) {
  if (!options.prompt_file.empty() && !options.prompt.empty()) throw api::Error("give -p or -f, not both");
  const std::string text = options.prompt_file.empty() ? options.prompt : read_prompt_file(options.prompt_file);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point load_start = Clock::now();
  api::ModelOptions model_options;
  model_options.tokenizer_path = options.tokenizer_path;
  model_options.chat_template = options.chat_template;
  const std::shared_ptr<const api::Model> model = api::Model::load(options.model_path, model_options);
  std::vector<int32_t> prompt = prompt_ids(options, text, *model);
  if (options.context_length > model->context_length())
    std::fprintf(stderr, "tandem run: warning: --ctx %lld is more than the model's context; using %lld\n",
                 static_cast<long long>(options.context_length), static_cast<long long>(model->context_length()));
  const int64_t context_length =
      options.context_length > 0 ? std::min(options.context_length, model->context_length()) : model->context_length();
  // One request: the whole prompt goes through one forward pass, as large as the prompt
  // (the context bounds it; a longer prompt is refused by stream() below).
  api::EngineOptions engine_options;
  engine_options.threads = options.threads;
  if (!options.draft_model_path.empty())
    engine_options.draft_model = api::Model::load(options.draft_model_path, api::ModelOptions{});
  engine_options.max_sequences = 1;
  engine_options.context_length = context_length;
  engine_options.kv_memory_bytes = options.kv_memory_bytes;
  // A speculative decode step carries its proposals too: 1 + draft_max tokens.
  const api::Speculation speculation = speculation_from_flag(
      options.speculation.empty() && !options.draft_model_path.empty() ? "draft" : options.speculation);
  const bool speculating = speculation != api::Speculation::None;
  const int64_t decode_tokens = 1 + (speculating ? std::max(0, options.sampling.speculative.draft_max) : 0);
  engine_options.profile = options.profile;
  engine_options.trace = !options.trace_path.empty();
  engine_options.max_batch_tokens =
      std::clamp<int64_t>(std::max(static_cast<int64_t>(prompt.size()), decode_tokens), 1, context_length);
  const KvTypes kv_types = options.kv_types.resolve();
  engine_options.kv_type_k = api_kv_type(kv_types.k);
  engine_options.kv_type_v = api_kv_type(kv_types.v);
  api::Engine engine = api::detail::EngineAccess::make(model, engine_options, device_forward);
  const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();

  api::GenerateOptions generate_options = options.sampling;
  generate_options.max_tokens = options.max_new_tokens;
  generate_options.speculative.type = speculation;
  generate_options.seed = options.seed >= 0 ? static_cast<uint64_t>(options.seed) : std::random_device{}();
  options.grammar.apply(&generate_options);

  api::Stream stream = engine.stream(prompt, generate_options);  // checks the request before anything is printed
  if (!options.print_ids && !is_chat_turn(options)) {
    std::fputs(text.c_str(), stdout);  // echoed as typed; a chat turn prints the answer alone
    std::fflush(stdout);
  }
  api::Result result;
  bool ends_with_newline = text.ends_with('\n') || is_chat_turn(options);
  result.prompt_ids = std::move(prompt);
  while (std::optional<api::Event> event = stream.next()) {
    result.tokens.insert(result.tokens.end(), event->tokens.begin(), event->tokens.end());
    if (!options.print_ids && !event->text.empty()) {
      std::fputs(event->text.c_str(), stdout);
      std::fflush(stdout);
      ends_with_newline = event->text.ends_with('\n');
    }
    if (event->finished) {
      result.finish_reason = event->finish_reason;
      result.error = std::move(event->error);
      result.usage = event->usage;
      result.timings = std::move(event->timings);
    }
  }
  if (options.print_ids) {
    std::vector<int32_t> sequence = result.prompt_ids;
    sequence.insert(sequence.end(), result.tokens.begin(), result.tokens.end());
    for (size_t i = 0; i < sequence.size(); ++i) std::printf(i ? " %d" : "%d", sequence[i]);
    std::printf("\n");
    std::fflush(stdout);
  }
  if (!options.print_ids && !ends_with_newline) {
    // The text ends its line on stdout, so what follows on stderr starts a line of its own
    // when both go to one terminal or file (make run).
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  if (!options.quiet) {
    std::fprintf(stderr, "seed:    %llu\n", static_cast<unsigned long long>(stream.seed()));
    print_timings(load_ms, result, model->kv_bytes_per_token(engine_options.kv_type_k, engine_options.kv_type_v));
  }
  if (options.profile) std::fputs(engine.profile_summary().c_str(), stderr);
  if (!options.trace_path.empty()) {
    engine.write_trace(options.trace_path);
    std::fprintf(stderr, "trace:   %s (open in https://ui.perfetto.dev or chrome://tracing)\n",
                 options.trace_path.c_str());
  }
  // The request failed after it started (a grammar past a matching limit): the text so far is
  // out, and the run exits as a failed one, saying why.
  if (!result.error.empty()) throw api::Error(result.error);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand("run", "Generate text from a prompt, streamed to stdout");
  command->add_option("-m,--model", options->model_path, "Model file (.gguf or llama2.c model.bin)")->required();
  command->add_option("-z,--tokenizer", options->tokenizer_path, "Tokenizer for llama2.c models (tokenizer.bin)");
  command->add_option("-p,--prompt", options->prompt, "Prompt text");
  command->add_option("-f,--file", options->prompt_file, "Read the prompt from FILE (instead of -p)");
  command->add_option("--system", options->system_prompt,
                      "System prompt (also -sys): the prompt becomes a chat turn in the model's chat template");
  command->add_option("--chat-template", options->chat_template,
                      "Render the prompt as a chat turn in this template: chatml, llama2, llama3, zephyr or a Jinja "
                      "FILE (default with --system: the model's own)");
  command->add_flag("--special", options->parse_special,
                    "Control-token text in the prompt (<|endoftext|>, <s>) becomes the control token (default: plain "
                    "text)");
  command
      ->add_option("-c,--ctx,--ctx-size", options->context_length, "Context in tokens (default and most: the model's)")
      ->check(CLI::NonNegativeNumber);
  add_byte_size_option(command, "--kv-memory", &options->kv_memory_bytes,
                       "KV cache memory (default: one full context)");
  command->add_flag("-q,--quiet", options->quiet, "No seed and timing summary on stderr");
  command->add_option("-n,--n-predict", options->max_new_tokens, "Tokens to generate at most")
      ->check(CLI::NonNegativeNumber);
  add_sampling_options(command, &options->sampling, &options->seed);
  command->add_option("-t,--threads", options->threads, "Threads (default: all cores)");
  command->add_flag("--ids", options->print_ids, "Print the whole token id sequence instead of text");
  add_kv_type_options(command, &options->kv_types);
  add_grammar_options(command, &options->grammar);
  command
      ->add_option("--spec", options->speculation,
                   "Speculative decoding: none, ngram (prompt lookup) or draft (default: draft with "
                   "--draft-model, else none)")
      ->check(CLI::IsMember({"none", "ngram", "draft"}));
  command->add_option("--draft-model", options->draft_model_path,
                      "Draft model for speculative decoding (same vocabulary as -m)");
  api::SpeculativeOptions& spec = options->sampling.speculative;
  command->add_option("--draft-max", spec.draft_max, "Speculative tokens proposed per step at most")
      ->capture_default_str();
  command->add_option("--draft-min", spec.draft_min, "Floor of the adaptive proposal length")->capture_default_str();
  command->add_option("--spec-ngram-min", spec.ngram_min, "Smallest n-gram prompt lookup matches")
      ->capture_default_str();
  command->add_option("--spec-ngram-max", spec.ngram_max, "Largest n-gram prompt lookup matches")
      ->capture_default_str();
  command->add_flag("--profile", options->profile,
                    "Per-op time, bytes, FLOPs and roofline summary (prefill and decode) on stderr");
  command->add_option("--trace", options->trace_path, "Write a Chrome trace (Perfetto) of the run to FILE");
  auto device = std::make_shared<std::string>("auto");
  add_device_option(command, device.get());
  auto compat = std::make_shared<CompatFlags>();
  add_compat_options(command, compat.get(), CompatScope::kGenerate);
  command->callback([options, device, compat, command] {
    apply_compat_flags(*compat, *command, &options->kv_types, &options->chat_template, device.get());
    // A draft model has its own forward pass and KV cache, the CPU's.
    DeviceForwardFactory device_forward =
        engine_device_forward(*device, options->draft_model_path.empty() ? "" : "--draft-model");
    if (!options->quiet)
      for (const std::string& note : compat_notes(*compat, device_forward != nullptr))
        std::fprintf(stderr, "tandem run: note: %s\n", note.c_str());
    run(*options, device_forward);
  });
}

}  // namespace tandem::cli
