// tandem chat-template: renders a chat template with OpenAI-style messages (and tools) and
// prints the prompt exactly, with no newline added, so a template can be checked alone.
// The messages file is a JSON array of messages or {"messages": [...], "tools": [...], other
// template variables...}.
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "chat/jinja/chat_template.h"
#include "cli/commands.h"

namespace tandem::cli {
namespace {

struct ChatTemplateOptions {
  std::string template_path;
  std::string messages_path;
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
};

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  TANDEM_CHECK_INPUT(file.good(), "cannot open {}", path);
  std::ostringstream text;
  text << file.rdbuf();
  TANDEM_CHECK_INPUT(!file.bad(), "cannot read {}", path);
  return text.str();
}

void run_chat_template(const ChatTemplateOptions& options) {
  const std::string template_text = read_file(options.template_path);
  nlohmann::ordered_json input;
  try {
    input = nlohmann::ordered_json::parse(read_file(options.messages_path));
  } catch (const nlohmann::json::exception& error) {
    throw InputError(fmt::format("{}: invalid JSON: {}", options.messages_path, error.what()));
  }
  nlohmann::ordered_json messages = input;
  nlohmann::ordered_json tools = nullptr;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (input.is_object()) {
    // Other keys are extra template variables, like apply_chat_template's **kwargs.
    TANDEM_CHECK_INPUT(input.contains("messages"), "{}: no \"messages\" in the object", options.messages_path);
    for (auto it = input.begin(); it != input.end(); ++it) {
      if (it.key() == "messages")
        messages = it.value();
      else if (it.key() == "tools")
        tools = it.value();
      else
        extra[it.key()] = it.value();
    }
  }
  TANDEM_CHECK_INPUT(messages.is_array(), "{}: messages must be a JSON array", options.messages_path);
  const std::string prompt =
      ChatTemplate(template_text)
          .render(messages, tools, options.add_generation_prompt, options.bos_token, options.eos_token, extra);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_chat_template_command(CLI::App& app) {
  auto options = std::make_shared<ChatTemplateOptions>();
  CLI::App* command = app.add_subcommand("chat-template", "Render a chat template (Jinja) with messages");
  command->add_option("--template", options->template_path, "Jinja chat template file")->required();
  command
      ->add_option("--messages", options->messages_path,
                   "JSON: an array of messages, or {\"messages\": [...], \"tools\": [...]}")
      ->required();
  command->add_flag("--add-generation-prompt", options->add_generation_prompt, "End with the assistant turn header");
  command->add_option("--bos", options->bos_token, "bos_token text (default: empty)");
  command->add_option("--eos", options->eos_token, "eos_token text (default: empty)");
  command->callback([options] { run_chat_template(*options); });
}

}  // namespace tandem::cli
