// Chat-template rendering as Hugging Face transformers does it: the template text from
// tokenizer_config.json / GGUF `tokenizer.chat_template`, OpenAI-style messages and tools,
// rendered by Tandem's Jinja2 subset (src/chat/jinja/). Errors are TemplateError.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja/ast.h"
#include "chat/jinja/template_error.h"

namespace tandem {

// Renders with the variables transformers passes: messages, tools (None when `tools` is
// null), documents (None), add_generation_prompt, bos_token, eos_token. ordered_json keeps
// the key order of the caller's JSON (what `tojson` prints); nlohmann::json has sorted it.
std::string render_chat_template(const std::string& template_text, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token);
std::string render_chat_template(const std::string& template_text, const nlohmann::json& messages,
                                 const nlohmann::json& tools, bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token);

// A template parsed once and rendered per request (the server's path).
class ChatTemplate {
 public:
  explicit ChatTemplate(const std::string& template_text);
  // `extra_variables` (a JSON object or null) adds template variables, as keyword
  // arguments to apply_chat_template do (e.g. date_string, builtin_tools).
  std::string render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                     bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token,
                     const nlohmann::ordered_json& extra_variables = nullptr) const;

 private:
  jinja::Template template_;
};

}  // namespace tandem
