// The text of one call region (what a tool-call marker opened, tool_call_parser.cpp finds
// them) -> function names and compact JSON arguments, per family; and where a JSON value
// ends in text still arriving. Pure functions of their input: no state, no ids, no throws.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::chat {

struct CallParts {
  std::string name;
  std::string arguments;  // compact JSON object text
};

enum class JsonScan { kComplete, kIncomplete, kInvalid };

// Where the object or array opening `text` ('{' or '[') ends: brackets matched outside
// strings (escapes honoured), at most kMaxJsonDepth deep; *end is one past its last byte.
// Not a validator (nlohmann parses what this delimits): it only says how far to read.
JsonScan scan_json_value(std::string_view text, size_t* end);

// The calls in a region's body, or nullopt with *why set when it is not what the family
// writes. `body` is the text between the opening and closing markers.
// Hermes <tool_call>: {"name", "arguments"} (or a list of them).
std::optional<std::vector<CallParts>> read_hermes_body(std::string_view body, std::string* why);
// A JSON list (or one object) of {"name"|"tool_name", "arguments"|"parameters"}: Mistral Nemo,
// Firefunction v2, Command R (+), Command R7B. Calls named `skip_name` are left out (Command R's
// `directly-answer` is how it says it calls nothing).
std::optional<std::vector<CallParts>> read_call_list(std::string_view body, std::string_view skip_name,
                                                     std::string* why);
// A Llama 3 bare call: {"name", "parameters"|"arguments"} or {"type": "function", ...}.
std::optional<CallParts> read_llama3_object(std::string_view json_text);
// After Llama 3's <|python_tag|>: JSON calls separated by ';', a built-in tool's
// `name.call(key="value", ...)`, else code for `python` ({"code": ...}).
std::optional<std::vector<CallParts>> read_llama3_python_tag(std::string_view body, std::string* why);
// Functionary v3.1 <function=NAME>{json}</function>: body is `NAME>{json}`.
std::optional<std::vector<CallParts>> read_functionary_function(std::string_view body, std::string* why);
// A call whose arguments are JSON, or code when the tool is `python` (Functionary's
// <|python_tag|> and >>>python segments).
std::optional<std::vector<CallParts>> read_named_arguments(std::string_view name, std::string_view arguments,
                                                           std::string* why);
// DeepSeek-R1: the whole region, <｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\n{...}\n```<｜tool▁call▁end｜>
// blocks (inside <｜tool▁calls▁begin｜>...<｜tool▁calls▁end｜> or not), whitespace between them.
std::optional<std::vector<CallParts>> read_deepseek_calls(std::string_view region, std::string* why);

}  // namespace tandem::chat
