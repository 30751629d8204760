// What the chat endpoint renders with: the model's own Jinja template (GGUF
// tokenizer.chat_template) when it has one and no built-in format was asked for, else a
// built-in format (chat_format.h). render_for_tokenizer() also says which bytes are the
// template's own, so that text a client wrote — content, names, tool calls, tool results,
// tool definitions — can never become a control token.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"
#include "chat/chat_message.h"
#include "tokenizer/tokenizer.h"

namespace tandem::chat {

struct CompiledTemplate;

// How a conversation's end is rendered, and what else the template sees.
struct RenderOptions {
  // End with the assistant's turn opener (transformers' add_generation_prompt).
  bool add_generation_prompt = true;
  // The last message is the assistant's and the prompt ends inside it, right after its
  // content (no end of turn, no new turn): the model continues that message — llama-server's
  // prefill, vLLM's continue_final_message. add_generation_prompt is then not used.
  bool continue_final_message = false;
  // Extra template variables (a JSON object, or null): chat_template_kwargs, such as Qwen3's
  // enable_thinking. Jinja templates only; the built-in formats have no switches.
  nlohmann::ordered_json template_kwargs = nullptr;
};

// Throws InputError unless `kwargs` is null or a JSON object whose keys are not the variables
// the renderer itself sets (messages, tools, documents, add_generation_prompt, bos_token,
// eos_token): a kwarg must not silently replace the conversation.
void check_template_kwargs(const nlohmann::ordered_json& kwargs);

struct ChatRenderer {
  ChatFormat format = ChatFormat::ChatML;
  std::string jinja_template;  // non-empty: render with it (src/chat/jinja)
  std::string bos_token;       // text of BOS/EOS, as templates print them
  std::string eos_token;
  // jinja_template parsed once (compile()), with what it expects of tool calls; without it,
  // each render parses the text. Shared: rendering is const and the parsed template
  // immutable, so any thread may use it.
  std::shared_ptr<const CompiledTemplate> compiled;

  // Parses jinja_template now (a server does this once at load, not per request). Throws
  // InputError when the template does not parse.
  void compile();

  // Prompt text ending with the assistant's turn opener (or as `options` say). Throws
  // InputError (bad role, an error the template raises, a final message that cannot be
  // continued: not the assistant's, with tool calls, or its content not printed where the
  // template's text can be cut after it).
  std::string render(const std::vector<ChatMessage>& messages, const std::vector<ToolDefinition>& tools = {},
                     const RenderOptions& options = {}) const;

  // The same text as render(), with the spans outside the client's strings, for
  // tokenizer.encode(chat.text, add_bos, chat.special_spans). For a Jinja template the
  // strings are located by probing (template_spans.h), most precisely first:
  //  1. every client string located: all of them outside the spans;
  //  2. else (a template that branches on names or schema words) the contents located, and
  //     the other strings lie in the spans, allowed only if none holds the text of one of
  //     `tokenizer`'s control tokens (InputError otherwise);
  //  3. else (a template that rewrites or repeats content) the whole text is special, with
  //     the same condition on every string.
  // Jinja-template roles must be one of the names chat templates know (InputError), since
  // they reach the spans.
  RenderedChat render_for_tokenizer(const std::vector<ChatMessage>& messages, const Tokenizer& tokenizer) const {
    return render_for_tokenizer(messages, {}, tokenizer);
  }
  RenderedChat render_for_tokenizer(const std::vector<ChatMessage>& messages, const std::vector<ToolDefinition>& tools,
                                    const Tokenizer& tokenizer, const RenderOptions& options = {}) const;

  // Whether the rendered text already begins with BOS (so the tokenizer must not add one).
  bool starts_with_bos(const std::string& text) const {
    return !bos_token.empty() && text.compare(0, bos_token.size(), bos_token) == 0;
  }
  std::string name() const { return jinja_template.empty() ? std::string(chat_format_name(format)) : "model template"; }
};

}  // namespace tandem::chat
