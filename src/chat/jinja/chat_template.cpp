// Chat-template entry points (see chat_template.h): JSON → Values, parse, render.
#include "chat/jinja/chat_template.h"

#include "chat/jinja/evaluator.h"
#include "chat/jinja/json_value.h"
#include "chat/jinja/parser.h"

namespace tandem {

ChatTemplate::ChatTemplate(const std::string& template_text) : template_(jinja::parse_template(template_text)) {}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                 bool add_generation_prompt, const std::string& bos_token, const std::string& eos_token,
                                 const nlohmann::ordered_json& extra_variables) const {
  using jinja::Value;
  // Exactly the names transformers' apply_chat_template passes (tools and documents are
  // None when absent, so `tools is defined` holds and `tools is none` tells).
  std::vector<std::pair<std::string, Value>> variables;
  if (extra_variables.is_object()) {
    for (auto it = extra_variables.begin(); it != extra_variables.end(); ++it) {
      variables.emplace_back(it.key(), jinja::value_from_json(it.value()));
    }
  }
  const std::vector<std::pair<std::string, Value>> fixed = {
      {"messages", jinja::value_from_json(messages)},
      {"tools", tools.is_null() ? Value::none() : jinja::value_from_json(tools)},
      {"documents", Value::none()},
      {"add_generation_prompt", Value(add_generation_prompt)},
      {"bos_token", Value(bos_token)},
      {"eos_token", Value(eos_token)},
  };
  variables.insert(variables.end(), fixed.begin(), fixed.end());
  return jinja::render_template(template_, variables);
}

std::string render_chat_template(const std::string& template_text, const nlohmann::ordered_json& messages,
                                 const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                 const std::string& bos_token, const std::string& eos_token) {
  return ChatTemplate(template_text).render(messages, tools, add_generation_prompt, bos_token, eos_token);
}

std::string render_chat_template(const std::string& template_text, const nlohmann::json& messages,
                                 const nlohmann::json& tools, bool add_generation_prompt, const std::string& bos_token,
                                 const std::string& eos_token) {
  return render_chat_template(template_text, nlohmann::ordered_json(messages), nlohmann::ordered_json(tools),
                              add_generation_prompt, bos_token, eos_token);
}

}  // namespace tandem
