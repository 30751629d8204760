// Reading call bodies (see tool_call_json.h). Arguments are re-serialised compactly from the
// parsed object, in the model's key order (ordered_json): what OpenAI sends and what a
// client's JSON.parse reads the same either way.
#include "chat/tool_call_json.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "chat/chat_message.h"
#include "tokenizer/utf8.h"

namespace tandem::chat {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view text) {
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

// Parsed JSON, or discarded (not JSON, or nested past kMaxJsonDepth: it is printed recursively).
ordered_json parse_json(std::string_view text) {
  ordered_json value = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!value.is_discarded() && json_deeper_than(value, kMaxJsonDepth)) return ordered_json::value_t::discarded;
  return value;
}

// Arguments as OpenAI sends them: an object's compact text. A model may write them as a
// string holding JSON (some Hermes fine-tunes); absent or null means no arguments.
std::optional<std::string> arguments_text(const ordered_json* value) {
  if (value == nullptr || value->is_null()) return "{}";
  if (value->is_object()) return value->dump();
  if (value->is_string()) {
    const ordered_json inner = parse_json(value->get_ref<const std::string&>());
    if (inner.is_object()) return inner.dump();
  }
  return std::nullopt;
}

const ordered_json* member(const ordered_json& object, std::string_view key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// {"name"|"tool_name": string, "arguments"|"parameters": object}; {"function": {...}} unwrapped.
std::optional<CallParts> call_from_object(const ordered_json& object) {
  if (!object.is_object()) return std::nullopt;
  if (const ordered_json* function = member(object, "function"); function != nullptr && function->is_object())
    return call_from_object(*function);
  const ordered_json* name = member(object, "name");
  if (name == nullptr) name = member(object, "tool_name");
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) return std::nullopt;
  const ordered_json* arguments = member(object, "arguments");
  if (arguments == nullptr) arguments = member(object, "parameters");
  std::optional<std::string> text = arguments_text(arguments);
  if (!text) return std::nullopt;
  return CallParts{name->get<std::string>(), std::move(*text)};
}

// The start of `text` for an error line, cut between UTF-8 characters.
std::string excerpt(std::string_view text) {
  size_t cut = 80;
  if (text.size() <= cut) return std::string(text);
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "...";
}

// Compact JSON of values built from the model's raw text (not parsed JSON, which is valid
// UTF-8): invalid bytes become U+FFFD rather than an exception.
std::string dump_text_values(const ordered_json& value) {
  return value.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

// A function name read from raw text (Functionary, DeepSeek): a word with no spaces or
// control bytes, in valid UTF-8 (it goes into the reply's JSON).
bool plausible_name(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  for (const char c : name)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7F) return false;
  return sanitize_utf8(name) == name;
}

// A Python literal of a built-in tool call's keyword argument: a quoted string (escapes
// \\ \" \' \n \t), or a bare word (number, True, False, None) up to ',' or ')'.
std::optional<ordered_json> python_literal(std::string_view text, size_t* pos) {
  if (*pos >= text.size()) return std::nullopt;
  const char quote = text[*pos];
  if (quote == '"' || quote == '\'') {
    std::string value;
    for (size_t i = *pos + 1; i < text.size(); ++i) {
      const char c = text[i];
      if (c == quote) {
        *pos = i + 1;
        return ordered_json(value);
      }
      if (c == '\\' && i + 1 < text.size()) {
        const char next = text[++i];
        value += next == 'n' ? '\n' : next == 't' ? '\t' : next;
      } else {
        value += c;
      }
    }
    return std::nullopt;
  }
  const size_t end = text.find_first_of(",)", *pos);
  if (end == std::string_view::npos) return std::nullopt;
  const std::string_view word = trim(text.substr(*pos, end - *pos));
  *pos = end;
  if (word == "True") return ordered_json(true);
  if (word == "False") return ordered_json(false);
  if (word == "None") return ordered_json(nullptr);
  ordered_json number = parse_json(word);
  if (number.is_number()) return number;
  return std::nullopt;
}

bool is_identifier(std::string_view name) {
  if (name.empty()) return false;
  for (const char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

// `name.call(key=value, ...)`, the form Llama 3.1 writes for brave_search and wolfram_alpha.
std::optional<CallParts> python_builtin_call(std::string_view body) {
  const size_t dot = body.find(".call(");
  if (dot == std::string_view::npos || !is_identifier(body.substr(0, dot)) || body.back() != ')') return std::nullopt;
  ordered_json arguments = ordered_json::object();
  size_t pos = dot + 6;
  for (;;) {
    while (pos < body.size() && kSpace.find(body[pos]) != std::string_view::npos) ++pos;
    if (pos < body.size() && body[pos] == ')') break;
    const size_t equals = body.find('=', pos);
    if (equals == std::string_view::npos) return std::nullopt;
    const std::string_view key = trim(body.substr(pos, equals - pos));
    if (!is_identifier(key)) return std::nullopt;
    pos = equals + 1;
    while (pos < body.size() && body[pos] == ' ') ++pos;
    std::optional<ordered_json> value = python_literal(body, &pos);
    if (!value) return std::nullopt;
    arguments[std::string(key)] = std::move(*value);
    while (pos < body.size() && body[pos] == ' ') ++pos;
    if (pos < body.size() && body[pos] == ',')
      ++pos;
    else if (pos >= body.size() || body[pos] != ')')
      return std::nullopt;
  }
  if (pos + 1 != body.size()) return std::nullopt;
  return CallParts{std::string(body.substr(0, dot)), dump_text_values(arguments)};
}

}  // namespace

JsonScan scan_json_value(std::string_view text, size_t* end) {
  std::string stack;  // the closers expected, innermost last
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '{': stack += '}'; break;
      case '[': stack += ']'; break;
      case '}':
      case ']':
        if (stack.empty() || stack.back() != c) return JsonScan::kInvalid;
        stack.pop_back();
        break;
      default:
        if (i == 0) return JsonScan::kInvalid;  // not an object or array
    }
    if (static_cast<int>(stack.size()) > kMaxJsonDepth) return JsonScan::kInvalid;
    if (stack.empty()) {
      *end = i + 1;
      return JsonScan::kComplete;
    }
  }
  return JsonScan::kIncomplete;
}

std::optional<std::vector<CallParts>> read_hermes_body(std::string_view body, std::string* why) {
  const ordered_json value = parse_json(trim(body));
  std::vector<CallParts> calls;
  if (value.is_array()) {
    for (const ordered_json& item : value) {
      std::optional<CallParts> call = call_from_object(item);
      if (!call) break;
      calls.push_back(std::move(*call));
    }
    if (!calls.empty() && calls.size() == value.size()) return calls;
  } else if (std::optional<CallParts> call = call_from_object(value)) {
    calls.push_back(std::move(*call));
    return calls;
  }
  *why = "not a {\"name\", \"arguments\"} object: " + excerpt(trim(body));
  return std::nullopt;
}

std::optional<std::vector<CallParts>> read_call_list(std::string_view body, std::string_view skip_name,
                                                     std::string* why) {
  const ordered_json value = parse_json(trim(body));
  const ordered_json list = value.is_object() ? ordered_json::array({value}) : value;
  std::vector<CallParts> calls;
  if (list.is_array() && !list.empty()) {
    for (const ordered_json& item : list) {
      std::optional<CallParts> call = call_from_object(item);
      if (!call) {
        *why = "a call in the list is not {\"name\", \"arguments\"}: " + excerpt(item.dump());
        return std::nullopt;
      }
      if (call->name != skip_name) calls.push_back(std::move(*call));
    }
    return calls;
  }
  *why = "not a JSON list of calls: " + excerpt(trim(body));
  return std::nullopt;
}

std::optional<CallParts> read_llama3_object(std::string_view json_text) {
  ordered_json value = parse_json(json_text);
  // {"type": "function", "function": {"name", "parameters"}}, as OpenAI writes calls.
  if (value.is_object() && value.contains("function") && value["function"].is_object() && value.size() <= 2 &&
      (value.size() == 1 || value.contains("type"))) {
    ordered_json inner = std::move(value["function"]);
    value = std::move(inner);
  }
  // A reply that is some other JSON object (the user asked for JSON) is content: a call
  // names the function and its arguments and nothing unexpected.
  if (!value.is_object() || !value.contains("name")) return std::nullopt;
  if (!value.contains("parameters") && !value.contains("arguments")) return std::nullopt;
  for (const auto& [key, item] : value.items())
    if (key != "name" && key != "parameters" && key != "arguments" && key != "type") return std::nullopt;
  return call_from_object(value);
}

std::optional<std::vector<CallParts>> read_llama3_python_tag(std::string_view body, std::string* why) {
  const std::string_view text = trim(body);
  std::vector<CallParts> calls;
  if (!text.empty() && text.front() == '{') {
    // {"name": ..., "parameters": ...}; {...}: several calls, ';' between them.
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = 0;
      if (text[pos] != '{' || scan_json_value(text.substr(pos), &end) != JsonScan::kComplete) break;
      std::optional<CallParts> call = read_llama3_object(text.substr(pos, end));
      if (!call) break;
      calls.push_back(std::move(*call));
      pos += end;
      while (pos < text.size() && (kSpace.find(text[pos]) != std::string_view::npos || text[pos] == ';')) ++pos;
    }
    if (pos == text.size() && !calls.empty()) return calls;
    *why = "<|python_tag|> JSON that is not a list of calls: " + excerpt(text);
    return std::nullopt;
  }
  if (std::optional<CallParts> call = python_builtin_call(text)) return std::vector<CallParts>{std::move(*call)};
  return read_named_arguments("python", text, why);
}

std::optional<std::vector<CallParts>> read_functionary_function(std::string_view body, std::string* why) {
  const size_t close = body.find('>');
  if (close == std::string_view::npos || close == 0) {
    *why = "<function=NAME> without a name: " + excerpt(body);
    return std::nullopt;
  }
  return read_named_arguments(trim(body.substr(0, close)), body.substr(close + 1), why);
}

std::optional<std::vector<CallParts>> read_named_arguments(std::string_view name, std::string_view arguments,
                                                           std::string* why) {
  if (!plausible_name(name)) {
    *why = "not a function name: " + excerpt(name);
    return std::nullopt;
  }
  const std::string_view text = trim(arguments);
  const ordered_json value = parse_json(text);
  if (value.is_object()) return std::vector<CallParts>{{std::string(name), value.dump()}};
  // Functionary's python tool takes the code itself, as the templates print it.
  if (name == "python" && !text.empty()) {
    return std::vector<CallParts>{{"python", dump_text_values({{"code", std::string(text)}})}};
  }
  *why = "arguments of " + std::string(name) + " are not a JSON object: " + excerpt(text);
  return std::nullopt;
}

std::optional<std::vector<CallParts>> read_deepseek_calls(std::string_view region, std::string* why) {
  constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>", kCallsEnd = "<｜tool▁calls▁end｜>";
  constexpr std::string_view kBegin = "<｜tool▁call▁begin｜>", kSep = "<｜tool▁sep｜>", kEnd = "<｜tool▁call▁end｜>";
  std::string_view text = trim(region);
  if (text.substr(0, kCallsBegin.size()) == kCallsBegin) text = trim(text.substr(kCallsBegin.size()));
  if (text.size() >= kCallsEnd.size() && text.substr(text.size() - kCallsEnd.size()) == kCallsEnd)
    text = trim(text.substr(0, text.size() - kCallsEnd.size()));
  std::vector<CallParts> calls;
  while (!text.empty()) {
    if (text.substr(0, kBegin.size()) != kBegin) {
      *why = "DeepSeek calls: expected <｜tool▁call▁begin｜> at: " + excerpt(text);
      return std::nullopt;
    }
    text.remove_prefix(kBegin.size());
    const size_t sep = text.find(kSep);
    const size_t newline = sep == std::string_view::npos ? sep : text.find('\n', sep);
    if (newline == std::string_view::npos) {
      *why = "DeepSeek call without TYPE<｜tool▁sep｜>NAME: " + excerpt(text);
      return std::nullopt;
    }
    const std::string_view name = trim(text.substr(sep + kSep.size(), newline - sep - kSep.size()));
    text.remove_prefix(newline + 1);
    const size_t end = text.find(kEnd);
    std::string_view arguments = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : trim(text.substr(end + kEnd.size()));
    // The ```json fence the template shows around the arguments.
    if (arguments.substr(0, 3) == "```") {
      const size_t line = arguments.find('\n');
      arguments = line == std::string_view::npos ? std::string_view() : arguments.substr(line + 1);
    }
    arguments = trim(arguments);
    if (arguments.size() >= 3 && arguments.substr(arguments.size() - 3) == "```")
      arguments = arguments.substr(0, arguments.size() - 3);
    if (name.empty()) {
      *why = "DeepSeek call without a name";
      return std::nullopt;
    }
    std::optional<std::vector<CallParts>> call = read_named_arguments(name, arguments, why);
    if (!call) return std::nullopt;
    calls.push_back(std::move(call->front()));
  }
  if (calls.empty()) {
    *why = "DeepSeek tool-call block without calls";
    return std::nullopt;
  }
  return calls;
}

}  // namespace tandem::chat
