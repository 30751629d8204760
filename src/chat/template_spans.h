// Where a Jinja chat template printed the client's strings, and so which bytes of its output
// are the template's own (the only ones where control tokens may be matched). A template is
// a program — it may trim, drop, repeat, escape or rewrite what it prints, or branch on it —
// so rather than parse it we render it once more with each client string replaced by a
// sentinel, see where the sentinels land, and splice the real strings back. The result is
// trusted only when the spliced text equals the real render byte for byte.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_format.h"

namespace tandem::chat {

// What a template renders: the messages and the tools (null when none), as
// chat_message.h builds them.
struct TemplateInput {
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;
};
// Renders `input` with the template (and the fixed variables). May throw InputError.
using TemplateRender = std::function<std::string(const TemplateInput& input)>;

enum class ProbeScope {
  kEverything,   // every client string (below)
  kContentOnly,  // message content only: for templates that branch on the other strings
};

// A client string and where it is in the input, for error messages:
// "messages[2].tool_calls[0].function.arguments", "tools[0].function.description".
struct ClientString {
  std::string path;
  std::string text;
  bool content = false;  // a message's content
};

// The non-empty client strings in `scope`, in document order. kEverything: message content,
// names, call ids, arguments (and, parsed into objects, their keys and values), tool
// definitions' strings and keys — all but the message roles (checked apart) and the words
// templates compare with or look up by name (OpenAI's field names, JSON Schema keywords and
// type names; see kTemplateVocabulary), which stay the template's and cannot spell a marker.
std::vector<ClientString> client_strings(const TemplateInput& input, ProbeScope scope);

// `text` (the render of `input`) with the spans outside every client string of `scope`;
// nullopt when they cannot be located: a content printed other than exactly once, a string
// printed other than as is, stripped or JSON-escaped (`tojson`), a template that branches
// on the strings, or a render error with the stand-ins.
std::optional<RenderedChat> locate_client_text(const TemplateRender& render, const TemplateInput& input,
                                               const std::string& text, ProbeScope scope);

}  // namespace tandem::chat
