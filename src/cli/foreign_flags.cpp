// refuse_foreign_flags and unexpected_arguments_message (see foreign_flags.h).
#include "cli/foreign_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "base/error.h"

namespace tandem::cli {
namespace {

struct ForeignFlag {
  std::initializer_list<std::string_view> spellings;  // llama.cpp's and vLLM's, short and long
  std::string_view advice;                            // Tandem's equivalent, or why there is none
};

// Flags of llama-server, llama-cli and vLLM's `vllm serve` with no Tandem flag of the same
// name (a command that declares one of these names takes it instead). Spellings from
// llama-server's README and vLLM's engine arguments.
const ForeignFlag kForeignFlags[] = {
    {{"-hf",
      "-hfr",
      "--hf-repo",
      "-hff",
      "--hf-file",
      "-hft",
      "--hf-token",
      "-hfd",
      "-hfrd",
      "--hf-repo-draft",
      "-hfv",
      "--hf-repo-v",
      "-hffv",
      "--hf-file-v",
      "-mu",
      "--model-url",
      "-dr",
      "--docker-repo",
      "--download-dir",
      "--revision",
      "--code-revision",
      "--tokenizer-revision"},
     "Tandem does not download models (it uses no network): give a local .gguf file with -m PATH"},
    {{"--load-format", "--config-format", "--tokenizer-mode", "--skip-tokenizer-init"},
     "no equivalent: the model and its tokenizer come from the GGUF file (-z FILE for a llama2.c model)"},
    {{"-tb", "--threads-batch"}, "use -t, --threads N (one count for prompt and generation)"},
    {{"-md", "--model-draft"}, "use --draft-model PATH"},
    {{"--speculative-config", "--draft", "--draft-n", "--draft-max-tokens"},
     "use --draft-model PATH with --draft-max N, or --spec ngram (prompt lookup)"},
    {{"-ngld", "--n-gpu-layers-draft", "--gpu-layers-draft", "-ctkd", "--cache-type-k-draft", "-ctvd",
      "--cache-type-v-draft", "-devd", "--device-draft", "-cd", "--ctx-size-draft", "--draft-p-min"},
     "no separate settings for the draft model: --draft-model PATH, --draft-max N, --draft-min N"},
    {{"-pp", "--pipeline-parallel-size"}, "use --pipeline S under mpirun -np S"},
    {{"-dp", "--data-parallel-size"}, "no equivalent: run one tandem serve per device"},
    {{"-sm", "--split-mode", "-ts", "--tensor-split", "-mg", "--main-gpu", "--list-devices"},
     "Tandem runs on one GPU or the CPU: --device cpu|cuda|auto"},
    {{"--mlock"}, "no equivalent: the model file is mapped read-only and the OS may page it"},
    {{"-nocb", "--no-cont-batching"}, "batching is always continuous; --parallel 1 serves one request at a time"},
    {{"--no-enable-prefix-caching"}, "prefix caching is always on (it never changes an answer)"},
    {{"--no-jinja"},
     "to replace the model's Jinja template, name a built-in: --chat-template chatml|llama2|llama3|zephyr"},
    {{"-s", "--seed"}, "in serve the seed is per request (the `seed` field); run and chat take -s, --seed"},
    {{"--temp", "--temperature", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n",
      "--presence-penalty", "--frequency-penalty", "-n", "--n-predict", "--predict"},
     "in serve sampling and length are per request (`temperature`, `top_k`, `top_p`, `min_p`, "
     "`repetition_penalty`, `max_tokens`, ...); run and chat take them as flags"},
    {{"--grammar", "--grammar-file", "-j", "--json-schema", "--json-schema-file", "-jf"},
     "in serve constrained output is per request (`response_format`, `grammar`, `json_schema`); run takes "
     "--grammar, --grammar-file, -j, --json-schema, --json-schema-file"},
    {{"--system", "--system-prompt", "-sys", "--system-prompt-file", "-spf"},
     "in serve the system message is part of each chat request; run and chat take --system TEXT (-sys)"},
    {{"-cnv", "--conversation", "-i", "--interactive", "-if", "--interactive-first"}, "use tandem chat -m MODEL"},
    {{"-r", "--reverse-prompt", "--in-prefix", "--in-suffix"},
     "no equivalent in run or chat; in serve stop strings are per request (`stop`)"},
    {{"-to", "--timeout"}, "use --read-timeout, --write-timeout and --idle-timeout SECONDS (serve)"},
    {{"--threads-http"}, "no equivalent: one I/O thread serves every connection (--max-connections bounds them)"},
    {{"-lv", "--verbosity", "--log-verbosity", "--log-verbose", "--uvicorn-log-level"}, "use -v, --verbose (serve)"},
    {{"--log-disable", "--disable-log-requests", "--disable-log-stats", "--enable-log-requests",
      "--no-enable-log-requests"},
     "no equivalent: serve logs one line per request on stderr (--log-format text|json)"},
    {{"--api-key-file"}, "use --api-key KEY"},
    {{"--trust-remote-code"}, "no equivalent: Tandem runs no code from model files"},
    {{"--quantization", "-q"},
     "Tandem computes with the model file's own tensor types: quantize with tandem convert --type Q8_0 (or Q4_0, ...)"},
    {{"--enforce-eager", "--compilation-config", "-O", "--cuda-graph-sizes"},
     "no equivalent: Tandem has no graph capture or compilation step"},
    {{"--swap-space", "--cpu-offload-gb", "--num-gpu-blocks-override", "-nkvo", "--no-kv-offload", "--kv-offload"},
     "the KV pool is sized by --kv-memory SIZE and lives where the model runs (--device); nothing is swapped"},
    {{"--max-logprobs"}, "no equivalent: top_logprobs is at most 20"},
    {{"--lora", "--lora-scaled", "--enable-lora", "--lora-modules", "--mmproj", "-mm", "--limit-mm-per-prompt"},
     "no equivalent: Tandem serves one text-only model without adapters"},
    {{"--rope-scaling", "--rope-scale", "--rope-freq-base", "--rope-freq-scale", "--yarn-orig-ctx", "--yarn-ext-factor",
      "--rope-theta", "--hf-overrides"},
     "no flag: RoPE scaling comes from the GGUF's metadata (tandem convert and gen-model write it)"},
    {{"--numa", "-C", "--cpu-mask", "-Cr", "--cpu-range", "--cpu-strict", "--prio", "--poll"},
     "no equivalent: -t, --threads N sets the compute threads"},
    {{"-dt", "--defrag-thold"}, "not needed: the KV cache is paged in blocks and never defragmented"},
    {{"--keep", "--context-shift", "--no-context-shift"},
     "no equivalent: a sequence stops at the end of its context (finish_reason length); nothing is shifted out"},
    {{"--reasoning-format", "--reasoning-parser", "--reasoning-budget"},
     "no flag: reasoning between the chat template's <think> markers goes to reasoning_content"},
    {{"--task", "--runner", "--convert"},
     "serve always answers generation and /v1/embeddings (--pooling mean|last); no task to choose"},
    {{"--rerank", "--reranking"},
     "no flag: /rerank is always served, for a model whose GGUF has a classification head (cls.output.weight)"},
    {{"--slots", "--no-slots", "--props"}, "no flag: /slots and /props are always served (read-only)"},
    {{"--webui", "--no-webui", "--path", "--api-prefix"},
     "no equivalent: the chat page is at / and the API at its fixed paths"},
    {{"--override-kv", "--override-tensor", "-ot", "-cmoe", "--cpu-moe", "-ncmoe", "--n-cpu-moe"},
     "no equivalent: the GGUF's metadata and tensors are used as they are; --device places the whole model"},
    {{"--cache-reuse", "--cache-ram", "-cram", "-kvu", "--kv-unified", "--no-kv-unified", "--swa-full"},
     "no equivalent: the prefix cache shares KV blocks between requests by itself (--kv-memory sizes the pool)"},
    {{"--guided-decoding-backend", "--structured-outputs-config"},
     "no backend to choose: structured output is Tandem's own grammar engine (response_format, grammar, json_schema)"},
    {{"--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs", "--ssl-key-file", "--ssl-cert-file"},
     "no TLS: put a TLS-terminating proxy in front of tandem serve"},
    {{"-sp"},
     "no equivalent (Tandem's --special is another thing: control-token text in the prompt becomes the control token)"},
    {{"--verbose-prompt"}, "use tandem run --ids (the token ids) or tandem chat --show-prompt"},
};

std::string flag_name(std::string_view arg) { return std::string(arg.substr(0, arg.find('='))); }

const ForeignFlag* find_foreign(std::string_view name) {
  for (const ForeignFlag& flag : kForeignFlags)
    for (std::string_view spelling : flag.spellings)
      if (spelling == name) return &flag;
  return nullptr;
}

// The subcommand the arguments name and the index of its name in args (0 when none).
std::pair<CLI::App*, size_t> find_subcommand(CLI::App& app, const std::vector<std::string>& args) {
  for (size_t i = 1; i < args.size(); ++i) {
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      if (sub->get_name() == args[i]) return {sub, i};
    if (!args[i].starts_with('-')) break;  // a value or a stray word before any subcommand
  }
  return {&app, 0};
}

bool declares(const CLI::App& command, const std::string& name) { return command.get_option_no_throw(name) != nullptr; }

// "tandem run, tandem serve": the subcommands that declare `name`, or "" (a llama.cpp alias
// given to a command that does not take it: -np to run).
std::string commands_declaring(CLI::App& app, const std::string& name) {
  std::string names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (declares(*sub, name)) names += (names.empty() ? "tandem " : ", tandem ") + sub->get_name();
  return names;
}

std::string command_name(const CLI::App& command) {
  return command.get_parent() == nullptr ? "tandem" : "tandem " + command.get_name();
}

}  // namespace

void refuse_foreign_flags(CLI::App& app, const RewrittenArgs& args) {
  const auto [command, at] = find_subcommand(app, args.args);
  if (at == 0) return;
  for (size_t i = at + 1; i < args.args.size(); ++i) {
    const std::string& arg = args.args[i];
    if (arg == "--") return;  // what follows is positional
    if (!arg.starts_with('-') || arg.size() < 2) continue;
    const std::string previous = args.args[i - 1];
    const CLI::Option* before = i - 1 > at ? command->get_option_no_throw(flag_name(previous)) : nullptr;
    if (before != nullptr && before->get_type_size() != 0 && previous.find('=') == std::string::npos)
      continue;  // the value of the option before it
    const std::string name = flag_name(arg);
    if (declares(*command, name)) continue;
    const std::string typed = flag_name(args.typed[i]);
    const ForeignFlag* foreign = find_foreign(typed);
    if (foreign == nullptr) foreign = find_foreign(name);
    if (foreign != nullptr)
      throw InputError(fmt::format("`{}` does not take {}: {}", command_name(*command), typed, foreign->advice));
    const std::string others = commands_declaring(app, name);
    if (!others.empty())
      throw InputError(fmt::format("`{}` does not take {} ({} {})", command_name(*command), typed, others,
                                   others.find(',') == std::string::npos ? "does" : "do"));
    if (is_multi_letter_single_dash(args.typed[i]))
      throw InputError(fmt::format("`{}` does not take {} (Tandem's single-dash flags are one letter; see {} --help)",
                                   command_name(*command), typed, command_name(*command)));
  }
}

std::string unexpected_arguments_message(CLI::App& app, const RewrittenArgs& args) {
  const auto [command, at] = find_subcommand(app, args.args);
  std::vector<std::string> extras = command->remaining();
  // CLI11 collects them in no useful order: put them back in the order given, as typed.
  std::vector<bool> used(args.args.size(), false);
  std::vector<std::pair<size_t, std::string>> placed;
  for (const std::string& extra : extras) {
    size_t found = args.args.size();
    for (size_t i = at + 1; i < args.args.size(); ++i)
      if (!used[i] && args.args[i] == extra) {
        found = i;
        break;
      }
    if (found < args.args.size()) {
      used[found] = true;
      placed.emplace_back(found, args.typed[found]);
    } else {
      placed.emplace_back(args.args.size(), extra);
    }
  }
  std::stable_sort(placed.begin(), placed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string list;
  for (const auto& [index, text] : placed) list += (list.empty() ? "" : ", ") + text;
  return fmt::format("`{}` does not take: {} (see {} --help)", command_name(*command), list, command_name(*command));
}

}  // namespace tandem::cli
