// Request fields -> one output grammar, and forced tool calls read back (see structured_output.h).
#include "server/structured_output.h"

#include "base/error.h"
#include "chat/tool_call_parser.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_limits.h"
#include "grammar/json_schema.h"
#include "grammar/regex_grammar.h"
#include "server/json_body.h"

namespace tandem::server {

namespace {

using Json = nlohmann::ordered_json;

// Compiles, turning the grammar module's InputError into the client's 400 under `field_name`.
template <typename Compile>
std::shared_ptr<const grammar::Grammar> compiled(const std::string& field_name, Compile compile) {
  try {
    return std::make_shared<const grammar::Grammar>(compile());
  } catch (const InputError& e) {
    bad(fmt::format("'{}': {}", field_name, e.what()));
  }
}

std::shared_ptr<const grammar::Grammar> schema_grammar(const std::string& field_name, const Json& schema,
                                                       const grammar::JsonGrammarOptions& options = {}) {
  return compiled(field_name, [&] { return grammar::json_schema_grammar(schema, options); });
}

// A JSON Schema given as an object or, as vLLM accepts it, as its JSON text (read as a body
// is: linear, with the body's limits).
Json schema_value(const std::string& field_name, const RequestJson& schema) {
  if (!schema.is_string()) return schema;
  try {
    return parse_json_body(schema.get<std::string>());
  } catch (const ApiError& e) {
    bad(fmt::format("'{}' must be a JSON Schema object or its JSON text, not {} ({})", field_name, shown(schema),
                    e.what()));
  }
}

// vLLM's guided_regex: the whole output matches the regular expression (regex_grammar.h).
std::shared_ptr<const grammar::Grammar> regex_grammar(const std::string& field_name, const RequestJson& pattern) {
  if (!pattern.is_string() || pattern.get<std::string>().empty())
    bad(fmt::format("'{}' must be a non-empty string (a regular expression), not {}", field_name, shown(pattern)));
  return compiled(field_name, [&] {
    return grammar::parse_gbnf("root ::= " + grammar::regex_to_gbnf(pattern.get<std::string>(), {}, "regex"));
  });
}

// GBNF rules with a `root` (llama-server's `grammar`; vLLM's guided_grammar, whose EBNF
// dialect for xgrammar is the same `name ::= ...` form).
std::shared_ptr<const grammar::Grammar> gbnf_grammar(const std::string& field_name, const RequestJson& text) {
  if (!text.is_string())
    bad(fmt::format("'{}' must be a string of GBNF rules, not {}", field_name, shown(text)), ErrorCode::InvalidType);
  if (text.get<std::string>().empty()) return nullptr;
  return compiled(field_name, [&] { return grammar::parse_gbnf(text.get<std::string>()); });
}

const chat::ToolDefinition& tool_named(const ApiRequest& request, const std::string& name) {
  for (const chat::ToolDefinition& tool : request.tools)
    if (tool.name == name) return tool;
  bad(fmt::format("'tool_choice' names the function \"{}\", which is not in 'tools'", name));
}

// A tool's parameters schema; a tool without one takes any object.
Json parameters_schema(const chat::ToolDefinition& tool) {
  return tool.parameters.is_null() ? Json{{"type", "object"}} : tool.parameters;
}

std::shared_ptr<const grammar::Grammar> response_format_grammar(const RequestJson& format) {
  if (!format.is_object() || !field(format, "type") || !format["type"].is_string())
    bad(fmt::format("'response_format' must be an object with a string 'type', not {}", shown(format)),
        ErrorCode::InvalidType);
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return nullptr;
  if (type == "json_object") return compiled("response_format", [] { return grammar::any_json_object_grammar(); });
  if (type != "json_schema")
    bad(fmt::format("'response_format.type' must be 'text', 'json_object' or 'json_schema', not {}",
                    shown(format["type"])));
  const RequestJson* wrapper = field(format, "json_schema");
  if (!wrapper || !wrapper->is_object())
    bad("'response_format.json_schema' must be an object {\"name\", \"schema\", \"strict\"?}", ErrorCode::InvalidType);
  const RequestJson* schema = field(*wrapper, "schema");
  // OpenAI requires a name; a schema without one is still clear enough to follow.
  if (!schema) return compiled("response_format", [] { return grammar::any_json_grammar(); });
  if (!schema->is_object() && !schema->is_boolean())
    bad(fmt::format("'response_format.json_schema.schema' must be a JSON Schema object, not {}", shown(*schema)),
        ErrorCode::InvalidType);
  return schema_grammar("response_format.json_schema.schema", *schema);
}

std::shared_ptr<const grammar::Grammar> choice_grammar(const RequestJson& choices,
                                                       const std::string& field_name = "guided_choice") {
  if (!choices.is_array() || choices.empty())
    bad(fmt::format("'{}' must be a non-empty array of strings, not {}", field_name, shown(choices)));
  // Each choice is an alternative of one rule (grammar_limits.h).
  if (choices.size() > grammar::kMaxRuleAlternatives)
    bad(fmt::format("'{}' has {} choices (the limit is {})", field_name, choices.size(),
                    grammar::kMaxRuleAlternatives));
  std::string alternatives;
  for (const RequestJson& choice : choices) {
    if (!choice.is_string() || choice.get<std::string>().empty())
      bad(fmt::format("'{}' must hold non-empty strings, not {}", field_name, shown(choice)));
    // A GBNF string literal: the text as a JSON string is one (the escapes agree).
    alternatives += (alternatives.empty() ? "" : " | ") + Json(choice.get<std::string>()).dump();
  }
  return compiled(field_name, [&] { return grammar::parse_gbnf("root ::= " + alternatives); });
}

// vLLM's `structured_outputs` object: exactly one of json, regex, choice, grammar, json_object,
// and the options that make sense here. disable_fallback: there is no other backend to fall
// back to; disable_additional_properties: the grammar never writes keys a schema does not list;
// disable_any_whitespace: no whitespace between JSON tokens. Any other field is a 400.
std::shared_ptr<const grammar::Grammar> structured_outputs_grammar(const RequestJson& params) {
  if (!params.is_object())
    bad(fmt::format("'structured_outputs' must be an object such as {{\"json\": {{...}}}}, not {}", shown(params)),
        ErrorCode::InvalidType);
  grammar::JsonGrammarOptions options;
  std::vector<std::string> kinds;
  for (const auto& [key, value] : params.items()) {
    if (value.is_null()) continue;
    if (key == "json" || key == "regex" || key == "choice" || key == "grammar") {
      kinds.push_back(key);
    } else if (key == "json_object" || key == "disable_fallback" || key == "disable_any_whitespace" ||
               key == "disable_additional_properties") {
      if (!value.is_boolean())
        bad(fmt::format("'structured_outputs.{}' must be true or false, not {}", key, shown(value)));
      if (key == "json_object" && value.get<bool>()) kinds.push_back(key);
      if (key == "disable_any_whitespace" && value.get<bool>()) options.max_whitespace = 0;
    } else {
      bad(fmt::format("'structured_outputs.{}' is not supported by this server (supported: json, regex, choice, "
                      "grammar, json_object, disable_any_whitespace, disable_additional_properties, disable_fallback)",
                      key));
    }
  }
  if (kinds.size() != 1)
    bad(kinds.empty() ? std::string("'structured_outputs' must set one of json, regex, choice, grammar, json_object")
                      : fmt::format("'structured_outputs' sets both '{}' and '{}'; set one", kinds[0], kinds[1]));
  const std::string& kind = kinds[0];
  const RequestJson& value = params[kind];
  const std::string name = "structured_outputs." + kind;
  if (kind == "json") return schema_grammar(name, schema_value(name, value), options);
  if (kind == "regex") return regex_grammar(name, value);
  if (kind == "choice") return choice_grammar(value, name);
  if (kind == "grammar") {
    std::shared_ptr<const grammar::Grammar> g = gbnf_grammar(name, value);
    if (!g) bad("'structured_outputs.grammar' is empty");
    return g;
  }
  return compiled(name, [&] { return grammar::any_json_object_grammar(options); });
}

}  // namespace

std::optional<nlohmann::ordered_json> forced_tool_call_schema(const ApiRequest& request) {
  const ToolChoice& choice = request.tool_choice;
  if (choice.mode == ToolChoice::Mode::Function) return parameters_schema(tool_named(request, choice.function));
  if (choice.mode != ToolChoice::Mode::Required) return std::nullopt;
  Json calls = Json::array();
  for (const chat::ToolDefinition& tool : request.tools) {
    calls.push_back({{"type", "object"},
                     {"properties", {{"name", {{"const", tool.name}}}, {"parameters", parameters_schema(tool)}}},
                     {"required", {"name", "parameters"}},
                     {"additionalProperties", false}});
  }
  Json items = calls.size() == 1 ? calls[0] : Json{{"anyOf", calls}};
  Json schema = {{"type", "array"}, {"items", items}, {"minItems", 1}};
  if (!request.parallel_tool_calls) schema["maxItems"] = 1;
  return schema;
}

std::shared_ptr<const grammar::Grammar> output_grammar(const RequestJson& body, const ApiRequest& request) {
  std::vector<std::string> asked;
  std::shared_ptr<const grammar::Grammar> result;
  auto take = [&](const char* name, std::shared_ptr<const grammar::Grammar> g) {
    if (!g) return;
    asked.emplace_back(name);
    result = std::move(g);
  };
  if (const RequestJson* format = field(body, "response_format"))
    take("response_format", response_format_grammar(*format));
  if (const RequestJson* gbnf = field(body, "grammar")) take("grammar", gbnf_grammar("grammar", *gbnf));
  if (const RequestJson* schema = field(body, "json_schema"))
    take("json_schema", schema_grammar("json_schema", *schema));
  if (const RequestJson* schema = field(body, "guided_json"))
    take("guided_json", schema_grammar("guided_json", schema_value("guided_json", *schema)));
  if (const RequestJson* choices = field(body, "guided_choice")) take("guided_choice", choice_grammar(*choices));
  if (const RequestJson* pattern = field(body, "guided_regex"))
    take("guided_regex", regex_grammar("guided_regex", *pattern));
  if (const RequestJson* gbnf = field(body, "guided_grammar"))
    take("guided_grammar", gbnf_grammar("guided_grammar", *gbnf));
  if (const RequestJson* params = field(body, "structured_outputs"))
    take("structured_outputs", structured_outputs_grammar(*params));
  if (std::optional<Json> schema = forced_tool_call_schema(request))
    take("tool_choice", schema_grammar("tools", *schema));
  if (asked.size() > 1) bad(fmt::format("'{}' and '{}' both constrain the output; send one", asked[0], asked[1]));
  return result;
}

namespace {

// The complete elements of a JSON array that may be cut anywhere: "[{...}, {...}, {..." gives
// the first two. Scans strings (with escapes) and nesting to find where each element ends;
// nullopt when the text does not start as an array.
std::optional<std::vector<Json>> complete_array_elements(const std::string& text) {
  size_t i = text.find_first_not_of(" \t\n\r");
  if (i == std::string::npos || text[i] != '[') return std::nullopt;
  std::vector<Json> out;
  ++i;
  while (true) {
    i = text.find_first_not_of(" \t\n\r,", i);
    if (i == std::string::npos || text[i] == ']') return out;
    const size_t start = i;
    int depth = 0;
    bool in_string = false;
    for (; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (c == '\\') {
          ++i;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) break;
      }
    }
    if (i >= text.size()) return out;  // the element was cut
    try {
      out.push_back(Json::parse(text.substr(start, i + 1 - start)));
    } catch (const Json::exception&) {
      return out;
    }
    ++i;
  }
}

}  // namespace

std::optional<std::vector<chat::ToolCall>> forced_tool_calls(const ApiRequest& request, const std::string& text,
                                                             uint64_t id_seed, bool* cut) {
  if (cut) *cut = false;
  Json value;
  try {
    value = Json::parse(text);
  } catch (const Json::exception&) {
    // Cut short (max_tokens, a stop string): for "required", the calls written in full before
    // the cut one are still calls.
    if (request.tool_choice.mode != ToolChoice::Mode::Required) return std::nullopt;
    std::optional<std::vector<Json>> complete = complete_array_elements(text);
    if (!complete || complete->empty()) return std::nullopt;
    value = Json(std::move(*complete));
    if (cut) *cut = true;
  }
  uint64_t rng = id_seed;
  // The ids of calls the model wrote in no template syntax: "call_" + 24 alphanumerics.
  auto next_id = [&] { return chat::next_tool_call_id(chat::ToolCallFormat::kNone, rng); };
  auto compact = [](const Json& arguments) { return arguments.dump(-1, ' ', false, Json::error_handler_t::replace); };
  std::vector<chat::ToolCall> calls;
  if (request.tool_choice.mode == ToolChoice::Mode::Function) {
    if (!value.is_object()) return std::nullopt;
    calls.push_back({next_id(), request.tool_choice.function, compact(value)});
    return calls;
  }
  if (!value.is_array() || value.empty()) return std::nullopt;
  for (const Json& call : value) {
    if (!call.is_object() || !call.contains("name") || !call["name"].is_string() || !call.contains("parameters"))
      return std::nullopt;
    calls.push_back({next_id(), call["name"].get<std::string>(), compact(call["parameters"])});
  }
  return calls;
}

}  // namespace tandem::server
