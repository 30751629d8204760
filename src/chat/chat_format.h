// Built-in chat formats: render a conversation into the prompt text a chat model family was
// trained on (Llama 2 [INST], ChatML, Llama 3, Zephyr), for models without a usable Jinja
// template (chat_renderer.h chooses). Each render also says which bytes are the format's
// own markup, so that text a client wrote can never become a control token. Tool calls,
// tool results and tool definitions follow one documented convention (chat_format.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_message.h"
#include "tokenizer/tokenizer.h"

namespace tandem::chat {

enum class ChatFormat { ChatML, Llama2, Llama3, Zephyr };

// "chatml", "llama2", "llama3", "zephyr"; nullopt for an unknown name.
std::optional<ChatFormat> chat_format_from_name(std::string_view name);
std::string_view chat_format_name(ChatFormat format);
// Recognises a Jinja chat template by its marker tokens; ChatML when empty or unrecognised.
ChatFormat detect_chat_format(std::string_view jinja_template);

// A rendered prompt and where the tokenizer may match control tokens: the template's or
// format's own text, never what the client sent (Tokenizer::encode with spans).
struct RenderedChat {
  std::string text;
  std::vector<TextSpan> special_spans;  // sorted, non-overlapping byte ranges of `text`
};

// The prompt for `messages` (and `tools`, described in the system prompt), ending with the
// assistant's turn opener unless add_generation_prompt is false (Llama 2's opener is the
// " [/INST]" that closes the user turn, there either way); BOS is not part of the text (the
// tokenizer adds it). Every byte that came from a message or tool is outside special_spans.
// Throws InputError for a role other than system, developer, user, assistant and tool.
RenderedChat render_builtin_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                                 const std::vector<ToolDefinition>& tools = {}, bool add_generation_prompt = true);
// Its text alone.
std::string render_chat(ChatFormat format, const std::vector<ChatMessage>& messages,
                        const std::vector<ToolDefinition>& tools = {});

}  // namespace tandem::chat
