// Built-in chat renderers (see chat_format.h). Each writes the family's published turn
// markers; special-token text such as "</s>" is emitted verbatim, as the templates do.
// Also where a rendered prompt's message content is located for the tokenizer, so that
// only the template's own text may hold control tokens.
#include "chat/chat_format.h"

#include <algorithm>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "chat/jinja/chat_template.h"
#include "chat/jinja/py_string.h"

namespace tandem::chat {

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

namespace {

nlohmann::ordered_json messages_json(const std::vector<ChatMessage>& messages) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& message : messages) list.push_back({{"role", message.role}, {"content", message.content}});
  return list;
}

// A role is printed by the template into text where control tokens are matched (it is part
// of real markers such as "<|user|>"), so only the roles chat templates know are accepted: a
// free-form lowercase name could still spell a marker ("<|{{role}}|>" with role "endoftext").
void check_template_role(const std::string& role) {
  static constexpr std::string_view kRoles[] = {"system", "developer", "user", "assistant", "tool", "ipython", "function"};
  const bool known = std::find(std::begin(kRoles), std::end(kRoles), role) != std::end(kRoles);
  TANDEM_CHECK_INPUT(known, "unknown chat role '{}' (expected system, developer, user, assistant, tool, ipython or function)",
                     role.substr(0, 64));
}

// Content is located by rendering once more with each message's content replaced by a
// sentinel. A template is a program (it may trim, drop, repeat or rewrite content, or move
// a system prompt elsewhere), so rather than parse it, we watch where the sentinel lands.
// The sentinel is private-use U+E000 around a tag: no template text contains it, and
// neither Python's nor our strip() removes it (both count \x1c-\x1f as whitespace).
std::string content_sentinel(size_t index) { return fmt::format("\xEE\x80\x80" "tandem:{}" "\xEE\x80\x80", index); }

// Whitespace on both sides of the sentinel: it survives where the content is printed as
// is and disappears where the template strips it. Unusual on purpose, so that a template
// printing its own whitespace before stripped content (Llama 3's "\n\n" + content|trim)
// is not mistaken for raw insertion.
constexpr std::string_view kProbeSpace = " \t\n\t ";

// The rendered text with each probed sentinel (and its surviving probe whitespace)
// replaced by the real content, stripped on the sides the template stripped; nullopt when a
// sentinel does not appear exactly once. The caller checks the result against a real render.
std::optional<RenderedChat> splice_content(const std::string& probe_text, const std::vector<ChatMessage>& messages) {
  struct Insert {
    size_t begin = 0, end = 0;  // probe_text[begin, end) becomes `content`
    std::string content;
  };
  std::vector<Insert> inserts;
  for (size_t k = 0; k < messages.size(); ++k) {
    if (messages[k].content.empty()) continue;  // rendered with its real (empty) content
    const std::string mark = content_sentinel(k);
    const size_t at = probe_text.find(mark);
    if (at == std::string::npos || probe_text.find(mark, at + 1) != std::string::npos) return std::nullopt;
    Insert insert{at, at + mark.size(), messages[k].content};
    const bool raw_left =
        at >= kProbeSpace.size() && probe_text.compare(at - kProbeSpace.size(), kProbeSpace.size(), kProbeSpace) == 0;
    const bool raw_right = probe_text.compare(insert.end, kProbeSpace.size(), kProbeSpace) == 0;
    if (raw_left) insert.begin -= kProbeSpace.size();
    if (raw_right) insert.end += kProbeSpace.size();
    if (!raw_left || !raw_right) insert.content = jinja::py_strip(insert.content, std::nullopt, !raw_left, !raw_right);
    inserts.push_back(std::move(insert));
  }
  std::sort(inserts.begin(), inserts.end(), [](const Insert& a, const Insert& b) { return a.begin < b.begin; });

  RenderedChat chat;
  // Template text joins the previous span when no content came between (empty content).
  auto add_template_text = [&chat](std::string_view text) {
    if (text.empty()) return;
    const size_t at = chat.text.size();
    if (!chat.special_spans.empty() && chat.special_spans.back().end == at) {
      chat.special_spans.back().end += text.size();
    } else {
      chat.special_spans.push_back({at, at + text.size()});
    }
    chat.text += text;
  };
  size_t pos = 0;
  for (const Insert& insert : inserts) {
    if (insert.begin < pos) return std::nullopt;  // overlapping: not a plain insertion
    add_template_text(std::string_view(probe_text).substr(pos, insert.begin - pos));
    chat.text += insert.content;
    pos = insert.end;
  }
  add_template_text(std::string_view(probe_text).substr(pos));
  return chat;
}

}  // namespace

void ChatRenderer::compile() {
  compiled = jinja_template.empty() ? nullptr : std::make_shared<const ChatTemplate>(jinja_template);
}

std::string ChatRenderer::render(const std::vector<ChatMessage>& messages) const {
  if (jinja_template.empty()) return render_chat(format, messages);
  if (compiled)
    return compiled->render(messages_json(messages), nlohmann::ordered_json(), /*add_generation_prompt=*/true,
                            bos_token, eos_token);
  return render_chat_template(jinja_template, messages_json(messages), nlohmann::ordered_json(),
                              /*add_generation_prompt=*/true, bos_token, eos_token);
}

RenderedChat ChatRenderer::render_for_tokenizer(const std::vector<ChatMessage>& messages,
                                                const Tokenizer& tokenizer) const {
  std::shared_ptr<const ChatTemplate> parsed = compiled;
  if (!jinja_template.empty()) {
    for (const ChatMessage& message : messages) check_template_role(message.role);
    if (!parsed) parsed = std::make_shared<const ChatTemplate>(jinja_template);
  }
  auto render_messages = [&](const std::vector<ChatMessage>& list) {
    if (!parsed) return render_chat(format, list);
    return parsed->render(messages_json(list), nlohmann::ordered_json(), /*add_generation_prompt=*/true, bos_token,
                          eos_token);
  };

  // The real render comes first, so its errors are the ones reported; the probe render must
  // then reproduce it byte for byte once the content is spliced back, which also rejects
  // templates that branch on what the content says.
  const std::string text = render_messages(messages);
  std::vector<ChatMessage> probe = messages;
  for (size_t k = 0; k < probe.size(); ++k) {
    if (!probe[k].content.empty()) {
      probe[k].content = std::string(kProbeSpace) + content_sentinel(k) + std::string(kProbeSpace);
    }
  }
  std::optional<RenderedChat> chat;
  try {
    chat = splice_content(render_messages(probe), messages);
  } catch (const InputError&) {
    // The template refused the stand-in content: fall through to the checked whole text.
  }
  if (chat && chat->text == text) return std::move(*chat);

  // The content could not be told apart from the template's text: the whole text may hold
  // control tokens, which is safe only when no message wrote a control token's text.
  for (const ChatMessage& message : messages) {
    const std::string_view control = tokenizer.find_control_text(message.content);
    TANDEM_CHECK_INPUT(control.empty(),
                       "message content contains the control-token text '{}', which this chat template would "
                       "not keep as plain text",
                       control);
  }
  return RenderedChat{text, {TextSpan{0, text.size()}}};
}

}  // namespace tandem::chat
