// Chat formats: renders a conversation into the prompt text a chat model was trained on.
// Built-in renderers for the common families (Llama 2 [INST], ChatML, Llama 3, Zephyr),
// chosen by recognising a GGUF's tokenizer.chat_template or by name, or the model's own Jinja
// template. render_for_tokenizer() also says which bytes are the template's own, so that
// special-token text typed inside a message can never become a control token.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tandem {
class ChatTemplate;
}

namespace tandem::chat {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatFormat { ChatML, Llama2, Llama3, Zephyr };

// "chatml", "llama2", "llama3", "zephyr"; nullopt for an unknown name.
std::optional<ChatFormat> chat_format_from_name(std::string_view name);
std::string_view chat_format_name(ChatFormat format);
// Recognises a Jinja chat template by its marker tokens; ChatML when empty or unrecognised.
ChatFormat detect_chat_format(std::string_view jinja_template);

// The prompt text for `messages`, ending with the assistant's turn opener. BOS is not part of
// the text (the tokenizer adds it). Throws InputError for an unknown role.
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages);

// A rendered prompt and where the tokenizer may match control tokens: everything except the
// messages' content (Tokenizer::encode with spans).
struct RenderedChat {
  std::string text;
  std::vector<TextSpan> special_spans;  // sorted, non-overlapping byte ranges of `text`
};

// What the chat endpoint renders with: the model's own Jinja template (GGUF
// tokenizer.chat_template) when it has one and no built-in was asked for, else a built-in.
struct ChatRenderer {
  ChatFormat format = ChatFormat::ChatML;
  std::string jinja_template;  // non-empty: render with it (src/tokenizer/jinja)
  std::string bos_token;       // text of BOS/EOS, as templates print them
  std::string eos_token;
  // jinja_template parsed once (compile()); without it, each render parses the text. Shared:
  // rendering is const and the parsed template immutable, so any thread may use it.
  std::shared_ptr<const ChatTemplate> compiled;

  // Parses jinja_template now (a server does this once at load, not per request). Throws
  // InputError when the template does not parse.
  void compile();

  // Prompt text ending with the assistant's turn opener. Throws InputError (bad role, or an
  // error the template raises).
  std::string render(const std::vector<ChatMessage>& messages) const;
  // The same text as render(), with the spans outside the messages' content, for
  // tokenizer.encode(chat.text, add_bos, chat.special_spans). When the template does not
  // insert each content verbatim (or trimmed) exactly once, the content cannot be located:
  // then the whole text is special, which is allowed only if no content holds the text of one
  // of `tokenizer`'s control tokens (InputError otherwise). Jinja-template roles must be made
  // of a-z and '_' (InputError), since they reach the special spans.
  RenderedChat render_for_tokenizer(const std::vector<ChatMessage>& messages,
                                    const Tokenizer& tokenizer) const;
  // Whether the rendered text already begins with BOS (so the tokenizer must not add one).
  bool starts_with_bos(const std::string& text) const {
    return !bos_token.empty() && text.compare(0, bos_token.size(), bos_token) == 0;
  }
  std::string name() const { return jinja_template.empty() ? std::string(chat_format_name(format)) : "model template"; }
};

}  // namespace tandem::chat
