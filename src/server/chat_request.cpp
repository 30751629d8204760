// Chat messages, tools and tool_choice from a request body (see chat_request.h). Fields
// OpenAI defines are checked where they appear; fields it does not define are ignored, as
// everywhere in the protocol.
#include "server/chat_request.h"

#include <algorithm>
#include <optional>
#include <set>

#include "base/error.h"

namespace tandem::server {
namespace {

std::optional<std::string> optional_string(const RequestJson& object, const char* key, const std::string& path) {
  const RequestJson* v = field(object, key);
  if (!v) return std::nullopt;
  if (!v->is_string())
    bad(fmt::format("'{}.{}' must be a string, not {}", path, key, shown(*v)), ErrorCode::InvalidType);
  return v->get<std::string>();
}

std::string required_string(const RequestJson& object, const char* key, const std::string& path) {
  std::optional<std::string> s = optional_string(object, key, path);
  if (!s || s->empty()) bad(fmt::format("'{}.{}' is required (a non-empty string)", path, key));
  return std::move(*s);
}

std::string index_path(const std::string& path, size_t index) { return fmt::format("{}[{}]", path, index); }

// A string, or an array of content parts of which only text parts are supported.
std::string content_text(const RequestJson& content, const std::string& path) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array())
    bad(fmt::format("'{}' must be a string or an array of content parts, not {}", path, shown(content)),
        ErrorCode::InvalidType);
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    const RequestJson& part = content[j];
    const std::string part_path = index_path(path, j);
    const RequestJson* type = part.is_object() ? field(part, "type") : nullptr;
    if (!type || !type->is_string())
      bad(fmt::format(
          "'{}' must be a content part with a string 'type' ({{\"type\": \"text\", \"text\": ...}}), not {}", part_path,
          shown(part)));
    if (type->get_ref<const std::string&>() != "text")
      bad(fmt::format("'{}' is a content part of type {}, which is not supported: Tandem reads text only (no image, "
                      "audio or file input)",
                      part_path, shown(*type)));
    const RequestJson* part_text = field(part, "text");
    if (!part_text || !part_text->is_string())
      bad(fmt::format("'{}.text' must be a string, not {}", part_path, part_text ? shown(*part_text) : "null"),
          ErrorCode::InvalidType);
    // Parts are pieces of one text: joined with nothing between, so a client that splits its
    // prompt keeps its own separators.
    text += part_text->get_ref<const std::string&>();
  }
  return text;
}

chat::ToolCall parse_tool_call(const RequestJson& call, const std::string& path) {
  if (!call.is_object())
    bad(fmt::format("'{}' must be a tool call ({{\"id\", \"type\": \"function\", \"function\": {{\"name\", "
                    "\"arguments\"}}}}), not {}",
                    path, shown(call)));
  chat::ToolCall parsed;
  parsed.id = required_string(call, "id", path);
  if (const RequestJson* type = field(call, "type"); type && *type != "function")
    bad(fmt::format("'{}.type' must be \"function\", not {}", path, shown(*type)));
  const RequestJson* function = field(call, "function");
  if (!function || !function->is_object())
    bad(fmt::format("'{}.function' must be an object with 'name' and 'arguments', not {}", path,
                    function ? shown(*function) : "null"),
        ErrorCode::InvalidType);
  parsed.name = required_string(*function, "name", path + ".function");
  const RequestJson* arguments = field(*function, "arguments");
  if (!arguments || !arguments->is_string())
    bad(fmt::format("'{}.function.arguments' must be a string holding the arguments as JSON text, not {}", path,
                    arguments ? shown(*arguments) : "null"),
        ErrorCode::InvalidType);
  parsed.arguments = arguments->get<std::string>();
  return parsed;
}

constexpr std::string_view kRoles[] = {"system", "developer", "user", "assistant", "tool"};

ChatMessage parse_message(const RequestJson& m, const std::string& path) {
  if (!m.is_object()) bad(fmt::format("'{}' must be a message object, not {}", path, shown(m)), ErrorCode::InvalidType);
  const RequestJson* role = field(m, "role");
  if (!role || !role->is_string())
    bad(fmt::format("'{}.role' must be a string, not {}", path, role ? shown(*role) : "null"), ErrorCode::InvalidType);
  ChatMessage message;
  message.role = role->get<std::string>();
  if (std::find(std::begin(kRoles), std::end(kRoles), message.role) == std::end(kRoles))
    bad(fmt::format("'{}.role' must be system, developer, user, assistant or tool, not {}", path, shown(*role)));

  if (const RequestJson* content = field(m, "content")) {
    message.content = content_text(*content, path + ".content");
  } else {
    message.null_content = true;
  }
  message.name = optional_string(m, "name", path).value_or("");

  if (const RequestJson* calls = field(m, "tool_calls")) {
    if (message.role != "assistant")
      bad(fmt::format("'{}.tool_calls' belongs on assistant messages, not on a {} message", path, message.role));
    if (!calls->is_array())
      bad(fmt::format("'{}.tool_calls' must be an array, not {}", path, shown(*calls)), ErrorCode::InvalidType);
    for (size_t k = 0; k < calls->size(); ++k)
      message.tool_calls.push_back(parse_tool_call((*calls)[k], index_path(path + ".tool_calls", k)));
  }
  if (field(m, "tool_call_id") && message.role != "tool")
    bad(fmt::format("'{}.tool_call_id' belongs on tool messages, not on a {} message", path, message.role));
  if (message.role == "tool") {
    if (!field(m, "tool_call_id"))
      bad(fmt::format("'{}' is a tool message without 'tool_call_id' (the id of the call it answers)", path));
    message.tool_call_id = required_string(m, "tool_call_id", path);
  }

  if (message.null_content) {
    if (message.role != "assistant")
      bad(fmt::format("'{}.content' is required in a {} message (a string or an array of text parts)", path,
                      message.role));
    if (message.tool_calls.empty())
      bad(fmt::format("'{}' is an assistant message with neither 'content' nor 'tool_calls'", path));
  }
  return message;
}

// OpenAI's rule for function names; it also keeps names plain in prompts and error messages.
bool valid_function_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

std::vector<ToolDefinition> parse_tools(const RequestJson& body) {
  const RequestJson* tools = field(body, "tools");
  if (!tools) return {};
  if (!tools->is_array())
    bad(fmt::format("'tools' must be an array of function tools, not {}", shown(*tools)), ErrorCode::InvalidType);
  std::vector<ToolDefinition> parsed;
  std::set<std::string> names;
  for (size_t k = 0; k < tools->size(); ++k) {
    const RequestJson& tool = (*tools)[k];
    const std::string path = index_path("tools", k);
    if (!tool.is_object())
      bad(fmt::format("'{}' must be a tool ({{\"type\": \"function\", \"function\": {{...}}}}), not {}", path,
                      shown(tool)),
          ErrorCode::InvalidType);
    const RequestJson* type = field(tool, "type");
    if (!type || *type != "function")
      bad(fmt::format("'{}.type' must be \"function\" (the only kind of tool Tandem supports), not {}", path,
                      type ? shown(*type) : "null"));
    const RequestJson* function = field(tool, "function");
    if (!function || !function->is_object())
      bad(fmt::format("'{}.function' must be an object with a 'name', not {}", path,
                      function ? shown(*function) : "null"),
          ErrorCode::InvalidType);
    const std::string function_path = path + ".function";
    ToolDefinition definition;
    const RequestJson* name = field(*function, "name");
    if (!name || !name->is_string() || !valid_function_name(name->get_ref<const std::string&>()))
      bad(fmt::format("'{}.name' must be 1 to 64 letters, digits, underscores or dashes, not {}", function_path,
                      name ? shown(*name) : "null"));
    definition.name = name->get<std::string>();
    if (!names.insert(definition.name).second)
      bad(fmt::format("'{}.name' {} names a second tool of that name", function_path, shown(*name)));
    definition.description = optional_string(*function, "description", function_path).value_or("");
    if (const RequestJson* parameters = field(*function, "parameters")) {
      if (!parameters->is_object())
        bad(fmt::format("'{}.parameters' must be a JSON Schema object, not {}", function_path, shown(*parameters)),
            ErrorCode::InvalidType);
      if (chat::json_deeper_than(*parameters, chat::kMaxJsonDepth))
        bad(fmt::format("'{}.parameters' nests deeper than {} levels", function_path, chat::kMaxJsonDepth));
      definition.parameters = *parameters;
    }
    definition.strict = bool_field(*function, "strict", false);
    parsed.push_back(std::move(definition));
  }
  return parsed;
}

constexpr const char* kToolChoiceShapes =
    "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";

ToolChoice parse_tool_choice(const RequestJson& body, const std::vector<ToolDefinition>& tools) {
  const RequestJson* choice = field(body, "tool_choice");
  if (!choice) return {};
  ToolChoice parsed;
  if (*choice == "none") {
    parsed.mode = ToolChoice::Mode::None;
  } else if (*choice == "auto") {
    parsed.mode = ToolChoice::Mode::Auto;
  } else if (*choice == "required") {
    parsed.mode = ToolChoice::Mode::Required;
  } else if (choice->is_object()) {
    const RequestJson* type = field(*choice, "type");
    const RequestJson* function = field(*choice, "function");
    const RequestJson* name = function && function->is_object() ? field(*function, "name") : nullptr;
    if (!type || *type != "function" || !name || !name->is_string())
      bad(fmt::format("'tool_choice' must be {}, not {}", kToolChoiceShapes, shown(*choice)));
    parsed.mode = ToolChoice::Mode::Function;
    parsed.function = name->get<std::string>();
    const bool defined =
        std::any_of(tools.begin(), tools.end(), [&](const ToolDefinition& t) { return t.name == parsed.function; });
    if (!tools.empty() && !defined)
      bad(fmt::format("'tool_choice' names the function {}, which is not in 'tools'", shown(*name)));
  } else {
    bad(fmt::format("'tool_choice' must be {}, not {}", kToolChoiceShapes, shown(*choice)));
  }
  const bool needs_tools = parsed.mode == ToolChoice::Mode::Required || parsed.mode == ToolChoice::Mode::Function;
  if (needs_tools && tools.empty()) bad(fmt::format("'tool_choice' {} needs 'tools' to choose from", shown(*choice)));
  return parsed;
}

}  // namespace

void parse_chat_fields(const RequestJson& body, ApiRequest& request) {
  const RequestJson* messages = field(body, "messages");
  if (!messages) bad("'messages' is required (a non-empty array)", ErrorCode::MissingRequired);
  if (!messages->is_array())
    bad(fmt::format("'messages' must be a non-empty array, not {}", shown(*messages)), ErrorCode::InvalidType);
  if (messages->empty()) bad("'messages' must be a non-empty array");
  for (size_t k = 0; k < messages->size(); ++k)
    request.messages.push_back(parse_message((*messages)[k], index_path("messages", k)));
  request.tools = parse_tools(body);
  request.tool_choice = parse_tool_choice(body, request.tools);
  request.parallel_tool_calls = bool_field(body, "parallel_tool_calls", true);
  request.render = parse_render_options(body, request.messages);
}

chat::RenderOptions parse_render_options(const RequestJson& body, const std::vector<ChatMessage>& messages) {
  chat::RenderOptions options;
  const bool ends_with_assistant = !messages.empty() && messages.back().role == "assistant";
  const RequestJson* add_generation_prompt = field(body, "add_generation_prompt");
  options.add_generation_prompt = bool_field(body, "add_generation_prompt", true);
  // llama-server continues a final assistant message unless told otherwise; vLLM asks for
  // continue_final_message. Both are honoured: absent, it follows the last message's role.
  const RequestJson* continue_final = field(body, "continue_final_message");
  options.continue_final_message = bool_field(body, "continue_final_message", ends_with_assistant);
  if (continue_final && options.continue_final_message) {
    if (!ends_with_assistant)
      bad("'continue_final_message' needs the last message to be the assistant's (the one to continue)");
    if (add_generation_prompt && options.add_generation_prompt)
      bad("'continue_final_message' and 'add_generation_prompt' cannot both be true: the prompt either ends inside "
          "the final message or opens a new turn");
  }
  // Prefill by default only where it can be: a final assistant message with tool calls stays a
  // closed turn.
  if (!continue_final && options.continue_final_message && !messages.back().tool_calls.empty())
    options.continue_final_message = false;
  if (const RequestJson* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      bad(fmt::format("'chat_template_kwargs' must be a JSON object, not {}", shown(*kwargs)), ErrorCode::InvalidType);
    try {
      chat::check_template_kwargs(*kwargs);
    } catch (const InputError& e) {
      bad(e.what());
    }
    options.template_kwargs = *kwargs;
  }
  return options;
}

nlohmann::ordered_json parse_template_kwargs_flag(std::string_view text) {
  nlohmann::ordered_json kwargs;
  try {
    kwargs = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    const std::string_view what = e.what();  // "[json.exception.parse_error.101] parse error at ..."
    const size_t close = what.find("] ");
    throw InputError(fmt::format("--chat-template-kwargs is not valid JSON: {}",
                                 what.substr(close == std::string_view::npos ? 0 : close + 2)));
  }
  TANDEM_CHECK_INPUT(kwargs.is_object(),
                     "--chat-template-kwargs must be a JSON object, such as "
                     "'{{\"enable_thinking\": false}}', not {}",
                     kwargs.dump().substr(0, 64));
  chat::check_template_kwargs(kwargs);
  return kwargs;
}

nlohmann::ordered_json merge_template_kwargs(const nlohmann::ordered_json& server_kwargs,
                                             const nlohmann::ordered_json& request_kwargs) {
  if (request_kwargs.is_null()) return server_kwargs;
  if (server_kwargs.is_null()) return request_kwargs;
  nlohmann::ordered_json merged = server_kwargs;
  for (const auto& [key, value] : request_kwargs.items()) merged[key] = value;
  return merged;
}

}  // namespace tandem::server
