// Built-in chat renderers (see chat_format.h). Each writes the family's published turn
// markers; special-token text such as "</s>" is emitted verbatim, as the templates do.
#include "server/chat_format.h"

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/chat_template.h"

#include "base/error.h"

namespace tandem::server {

std::optional<ChatFormat> chat_format_from_name(std::string_view name) {
  if (name == "chatml") return ChatFormat::ChatML;
  if (name == "llama2") return ChatFormat::Llama2;
  if (name == "llama3") return ChatFormat::Llama3;
  if (name == "zephyr") return ChatFormat::Zephyr;
  return std::nullopt;
}

std::string_view chat_format_name(ChatFormat format) {
  switch (format) {
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama2: return "llama2";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Zephyr: return "zephyr";
  }
  return "chatml";
}

ChatFormat detect_chat_format(std::string_view t) {
  // Most specific markers first: a Llama 3 template never mentions [INST], but some
  // ChatML-derived templates mention other families in comments, so order matters.
  if (t.find("<|start_header_id|>") != std::string_view::npos) return ChatFormat::Llama3;
  if (t.find("<|im_start|>") != std::string_view::npos) return ChatFormat::ChatML;
  if (t.find("<|user|>") != std::string_view::npos) return ChatFormat::Zephyr;
  if (t.find("[INST]") != std::string_view::npos) return ChatFormat::Llama2;
  return ChatFormat::ChatML;
}

namespace {

void check_role(const ChatMessage& m) {
  TANDEM_CHECK_INPUT(m.role == "system" || m.role == "user" || m.role == "assistant",
                     "unknown chat role '{}' (expected system, user or assistant)", m.role);
}

std::string render_llama2(const std::vector<ChatMessage>& messages) {
  // [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] {user} [/INST]
  std::string out, system;
  bool first_user = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      system = m.content;
    } else if (m.role == "user") {
      if (!first_user) out += "<s>";
      out += "[INST] ";
      if (!system.empty()) {
        out += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
        system.clear();
      }
      out += m.content + " [/INST]";
      first_user = false;
    } else {
      out += " " + m.content + " </s>";
    }
  }
  return out;
}

}  // namespace

std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages) {
  for (const ChatMessage& m : messages) check_role(m);
  std::string out;
  switch (format) {
    case ChatFormat::ChatML:
      for (const ChatMessage& m : messages) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      out += "<|im_start|>assistant\n";
      break;
    case ChatFormat::Llama2:
      out = render_llama2(messages);
      break;
    case ChatFormat::Llama3:
      for (const ChatMessage& m : messages)
        out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + m.content + "<|eot_id|>";
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::Zephyr:
      for (const ChatMessage& m : messages) out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
      out += "<|assistant|>\n";
      break;
  }
  return out;
}

std::string ChatRenderer::render(const std::vector<ChatMessage>& messages) const {
  if (jinja_template.empty()) return render_chat(format, messages);
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& message : messages) list.push_back({{"role", message.role}, {"content", message.content}});
  return render_chat_template(jinja_template, list, nlohmann::ordered_json(), /*add_generation_prompt=*/true, bos_token,
                              eos_token);
}

}  // namespace tandem::server
