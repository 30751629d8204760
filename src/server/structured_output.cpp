// Request fields -> one output grammar, and forced tool calls read back (see structured_output.h).
#include "server/structured_output.h"

#include "base/error.h"
#include "chat/tool_call_parser.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_limits.h"
#include "grammar/json_schema.h"
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

std::shared_ptr<const grammar::Grammar> schema_grammar(const std::string& field_name, const Json& schema) {
  return compiled(field_name, [&] { return grammar::json_schema_grammar(schema); });
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
    bad(fmt::format("'response_format' must be an object with a string 'type', not {}", shown(format)));
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return nullptr;
  if (type == "json_object") return compiled("response_format", [] { return grammar::any_json_grammar(); });
  if (type != "json_schema")
    bad(fmt::format("'response_format.type' must be 'text', 'json_object' or 'json_schema', not {}",
                    shown(format["type"])));
  const RequestJson* wrapper = field(format, "json_schema");
  if (!wrapper || !wrapper->is_object())
    bad("'response_format.json_schema' must be an object {\"name\", \"schema\", \"strict\"?}");
  const RequestJson* schema = field(*wrapper, "schema");
  // OpenAI requires a name; a schema without one is still clear enough to follow.
  if (!schema) return compiled("response_format", [] { return grammar::any_json_grammar(); });
  if (!schema->is_object() && !schema->is_boolean())
    bad(fmt::format("'response_format.json_schema.schema' must be a JSON Schema object, not {}", shown(*schema)));
  return schema_grammar("response_format.json_schema.schema", *schema);
}

std::shared_ptr<const grammar::Grammar> choice_grammar(const RequestJson& choices) {
  if (!choices.is_array() || choices.empty())
    bad(fmt::format("'guided_choice' must be a non-empty array of strings, not {}", shown(choices)));
  // Each choice is an alternative of one rule (grammar_limits.h).
  if (choices.size() > grammar::kMaxRuleAlternatives)
    bad(fmt::format("'guided_choice' has {} choices (the limit is {})", choices.size(), grammar::kMaxRuleAlternatives));
  std::string alternatives;
  for (const RequestJson& choice : choices) {
    if (!choice.is_string() || choice.get<std::string>().empty())
      bad(fmt::format("'guided_choice' must hold non-empty strings, not {}", shown(choice)));
    // A GBNF string literal: the text as a JSON string is one (the escapes agree).
    alternatives += (alternatives.empty() ? "" : " | ") + Json(choice.get<std::string>()).dump();
  }
  return compiled("guided_choice", [&] { return grammar::parse_gbnf("root ::= " + alternatives); });
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
  if (const RequestJson* gbnf = field(body, "grammar")) {
    if (!gbnf->is_string()) bad(fmt::format("'grammar' must be a string of GBNF rules, not {}", shown(*gbnf)));
    if (!gbnf->get<std::string>().empty())
      take("grammar", compiled("grammar", [&] { return grammar::parse_gbnf(gbnf->get<std::string>()); }));
  }
  if (const RequestJson* schema = field(body, "json_schema"))
    take("json_schema", schema_grammar("json_schema", *schema));
  if (const RequestJson* schema = field(body, "guided_json")) {
    Json parsed = *schema;
    if (schema->is_string()) {  // vLLM accepts the schema as JSON text too: read as a body is (linear, limits)
      try {
        parsed = parse_json_body(schema->get<std::string>());
      } catch (const ApiError& e) {
        bad(fmt::format("'guided_json' must be a JSON Schema object or its JSON text, not {} ({})", shown(*schema),
                        e.what()));
      }
    }
    take("guided_json", schema_grammar("guided_json", parsed));
  }
  if (const RequestJson* choices = field(body, "guided_choice")) take("guided_choice", choice_grammar(*choices));
  if (std::optional<Json> schema = forced_tool_call_schema(request))
    take("tool_choice", schema_grammar("tools", *schema));
  if (asked.size() > 1) bad(fmt::format("'{}' and '{}' both constrain the output; send one", asked[0], asked[1]));
  return result;
}

std::optional<std::vector<chat::ToolCall>> forced_tool_calls(const ApiRequest& request, const std::string& text,
                                                             uint64_t id_seed) {
  Json value;
  try {
    value = Json::parse(text);
  } catch (const Json::exception&) {
    return std::nullopt;
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
