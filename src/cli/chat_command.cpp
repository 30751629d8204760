// tandem chat: an interactive conversation with a model in the terminal, rendered through its
// chat template (or --chat-template). The history is carried across turns (the engine's
// prefix cache keeps its KV, so each turn prefills only what is new); the oldest exchanges
// are dropped when it no longer fits the context. Commands: /reset, /system TEXT, /exit,
// /help. Ctrl-C stops the answer in progress; at the prompt, a second Ctrl-C exits; so does
// end of input. Built on the public C++ API, as `tandem run` is (with its hook for --device).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "api/engine_state.h"
#include "cli/chat_input.h"
#include "cli/commands.h"
#include "cli/compat_options.h"
#include "cli/device_options.h"
#include "cli/interrupt.h"
#include "cli/kv_type_options.h"
#include "cli/sampling_options.h"
#include "tandem/tandem.h"

namespace tandem::cli {
namespace {

struct ChatOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string chat_template;
  std::string system_prompt;
  int64_t max_tokens = -1;  // per answer; < 0: up to the end of the context
  api::GenerateOptions sampling;
  int64_t seed = -1;
  int threads = 0;
  int64_t context_length = 0;  // 0: the model's
  KvTypeFlags kv_types;
  bool show_prompt = false;
};

constexpr const char* kHelp =
    "commands: /reset (forget the conversation), /system TEXT (set the system prompt; /system alone clears it), "
    "/exit; a line ending in \\ continues on the next; \"\"\" on a line of its own starts and ends a pasted "
    "block; Ctrl-C stops an answer, twice at the prompt exits, as does Ctrl-D\n";

struct Conversation {
  std::string system_prompt;
  std::vector<api::ChatMessage> turns;  // user, assistant, user, ...

  std::vector<api::ChatMessage> messages() const {
    std::vector<api::ChatMessage> all;
    if (!system_prompt.empty()) all.push_back({"system", system_prompt});
    all.insert(all.end(), turns.begin(), turns.end());
    return all;
  }
};

// The conversation's prompt ids, after dropping the oldest exchanges while it leaves no room
// to answer; std::nullopt when the newest message alone does not fit.
std::optional<std::vector<int32_t>> fit_prompt(const api::Model& model, int64_t context_length,
                                               Conversation& conversation) {
  int dropped = 0;
  for (;;) {
    std::vector<int32_t> ids = model.tokenize_chat(conversation.messages());
    if (static_cast<int64_t>(ids.size()) < context_length) {
      if (dropped > 0)
        std::fprintf(stderr, "(dropped the %d oldest exchange%s to fit the context of %lld tokens)\n", dropped,
                     dropped == 1 ? "" : "s", static_cast<long long>(context_length));
      return ids;
    }
    if (conversation.turns.size() < 3) return std::nullopt;
    conversation.turns.erase(conversation.turns.begin(), conversation.turns.begin() + 2);
    ++dropped;
  }
}

// Streams the answer to the last user message to stdout and appends it to the conversation
// (as far as it got when Ctrl-C stopped it); the statistics line goes to stderr.
void answer(api::Engine& engine, const ChatOptions& options, Conversation& conversation) {
  const api::Model& model = engine.model();
  const int64_t context_length = engine.context_length();
  std::optional<std::vector<int32_t>> prompt = fit_prompt(model, context_length, conversation);
  if (!prompt) {
    std::fprintf(stderr, "(that message does not fit the context of %lld tokens; not sent)\n",
                 static_cast<long long>(context_length));
    conversation.turns.pop_back();
    return;
  }
  if (options.show_prompt)
    std::fprintf(stderr, "--- prompt: %zu tokens ---\n%s\n--- end of prompt ---\n", prompt->size(),
                 model.render_chat(conversation.messages()).c_str());
  api::GenerateOptions generate = options.sampling;
  const int64_t room = context_length - static_cast<int64_t>(prompt->size());
  generate.max_tokens = options.max_tokens < 0 ? room : std::min(options.max_tokens, room);
  if (options.seed >= 0) generate.seed = static_cast<uint64_t>(options.seed);
  const int64_t prompt_tokens = static_cast<int64_t>(prompt->size());
  api::Stream stream = engine.stream(std::move(*prompt), generate);
  take_interrupt();  // a Ctrl-C from before the answer began is not meant for it
  std::string text;
  api::Event last;
  while (std::optional<api::Event> event = stream.next()) {
    // Polled between tokens: the handler cannot take the stream's lock itself.
    if (take_interrupt()) stream.cancel();
    std::fputs(event->text.c_str(), stdout);
    std::fflush(stdout);
    text += event->text;
    if (event->finished) last = std::move(*event);
  }
  if (!text.ends_with('\n')) std::fputc('\n', stdout);
  std::fflush(stdout);
  const api::Timings& t = last.timings;
  const auto decode_steps = static_cast<double>(t.itl_ms.size());
  std::fprintf(
      stderr, "[%lld tokens, %.1f tokens/s, TTFT %.1f ms, prompt %lld tokens (%lld cached)%s]\n",
      static_cast<long long>(last.usage.completion_tokens), t.decode_ms > 0 ? decode_steps * 1000.0 / t.decode_ms : 0.0,
      t.ttft_ms, static_cast<long long>(prompt_tokens), static_cast<long long>(last.usage.cached_tokens),
      last.finish_reason == api::FinishReason::Cancelled ? ", stopped"
      : last.finish_reason == api::FinishReason::ContextLimit || last.finish_reason == api::FinishReason::Length
          ? ", token limit"
          : "");
  conversation.turns.push_back({"assistant", text});
}

// A line starting with '/': true when it was one of the commands (false: /exit).
bool run_command(const std::string& line, Conversation& conversation) {
  const std::string name = line.substr(0, line.find(' '));
  const std::string argument = line.size() > name.size() ? line.substr(name.size() + 1) : "";
  if (name == "/exit" || name == "/quit") return false;
  if (name == "/reset") {
    conversation.turns.clear();
    std::fputs("(conversation cleared)\n", stderr);
  } else if (name == "/system") {
    conversation.system_prompt = argument;
    std::fputs(argument.empty() ? "(system prompt cleared)\n" : "(system prompt set)\n", stderr);
  } else {
    if (name != "/help") std::fprintf(stderr, "unknown command %s; ", name.c_str());
    std::fputs(kHelp, stderr);
  }
  return true;
}

// device_forward: the engine's forward pass off the CPU (engine_device_forward); null: the CPU.
void chat(const ChatOptions& options, const DeviceForwardFactory& device_forward) {
  catch_interrupts();  // before the engine's threads start, so they inherit SIGINT blocked
  api::ModelOptions model_options;
  model_options.tokenizer_path = options.tokenizer_path;
  model_options.chat_template = options.chat_template;
  const std::shared_ptr<const api::Model> model = api::Model::load(options.model_path, model_options);
  if (options.context_length > model->context_length())
    std::fprintf(stderr, "tandem chat: warning: --ctx %lld is more than the model's context; using %lld\n",
                 static_cast<long long>(options.context_length), static_cast<long long>(model->context_length()));
  api::EngineOptions engine_options;
  engine_options.threads = options.threads;
  engine_options.max_sequences = 1;
  engine_options.context_length = options.context_length;
  const KvTypes kv_types = options.kv_types.resolve();
  engine_options.kv_type_k = api_kv_type(kv_types.k);
  engine_options.kv_type_v = api_kv_type(kv_types.v);
  api::Engine engine = api::detail::EngineAccess::make(model, engine_options, device_forward);
  receive_interrupts_here();
  std::fprintf(stderr, "tandem chat: %s, chat format %s, context %lld tokens; /help for commands\n",
               options.model_path.c_str(), model->chat_format().c_str(),
               static_cast<long long>(engine.context_length()));

  Conversation conversation{options.system_prompt, {}};
  bool interrupted_at_prompt = false;
  for (;;) {
    const ChatInput input = read_chat_input("> ", "... ");
    if (input.kind == ChatInput::Kind::EndOfInput) break;
    if (input.kind == ChatInput::Kind::Interrupted) {
      if (interrupted_at_prompt) break;
      interrupted_at_prompt = true;
      std::fputs("\n(Ctrl-C again to exit, or /exit)\n", stderr);
      continue;
    }
    interrupted_at_prompt = false;
    if (input.text.find_first_not_of(" \t\n") == std::string::npos) continue;
    if (input.text.front() == '/') {
      if (!run_command(input.text, conversation)) break;
      continue;
    }
    conversation.turns.push_back({"user", input.text});
    try {
      answer(engine, options, conversation);
    } catch (const api::Error& error) {  // a request the engine refuses ends this turn, not the chat
      std::fprintf(stderr, "tandem chat: error: %s\n", error.what());
      if (!conversation.turns.empty() && conversation.turns.back().role == "user") conversation.turns.pop_back();
    }
  }
  std::fputc('\n', stdout);
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto options = std::make_shared<ChatOptions>();
  CLI::App* command = app.add_subcommand("chat", "Interactive chat with a model in the terminal");
  command->add_option("-m,--model", options->model_path, "Model file (.gguf or llama2.c model.bin)")->required();
  command->add_option("-z,--tokenizer", options->tokenizer_path, "Tokenizer for llama2.c models (tokenizer.bin)");
  command->add_option("--chat-template", options->chat_template,
                      "Chat template: chatml, llama2, llama3, zephyr or a Jinja FILE (default: the model's own)");
  command->add_option("--system", options->system_prompt, "System prompt (also -sys); /system changes it");
  command->add_option("-n,--n-predict", options->max_tokens,
                      "Tokens per answer at most (default: to the context's end)");
  add_sampling_options(command, &options->sampling, &options->seed);
  command
      ->add_option("-c,--ctx,--ctx-size", options->context_length, "Context in tokens (default and most: the model's)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("-t,--threads", options->threads, "Threads (default: all cores)");
  add_kv_type_options(command, &options->kv_types);
  command->add_flag("--show-prompt", options->show_prompt,
                    "Print each turn's whole rendered prompt (the conversation so far) on stderr");
  auto device = std::make_shared<std::string>("auto");
  add_device_option(command, device.get());
  auto compat = std::make_shared<CompatFlags>();
  add_compat_options(command, compat.get(), CompatScope::kGenerate);
  command->callback([options, device, compat, command] {
    apply_compat_flags(*compat, *command, &options->kv_types, &options->chat_template, device.get());
    DeviceForwardFactory device_forward = engine_device_forward(*device);
    for (const std::string& note : compat_notes(*compat, device_forward != nullptr))
      std::fprintf(stderr, "tandem chat: note: %s\n", note.c_str());
    chat(*options, device_forward);
  });
}

}  // namespace tandem::cli
