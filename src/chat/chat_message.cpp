// Chat messages and tools -> the JSON documents a chat template renders (see chat_message.h).
#include "chat/chat_message.h"

#include "base/error.h"

namespace tandem::chat {

using nlohmann::ordered_json;

bool json_deeper_than(const ordered_json& value, int limit) {
  if (!value.is_structured()) return false;
  if (limit <= 0) return true;
  for (const ordered_json& item : value)
    if (json_deeper_than(item, limit - 1)) return true;
  return false;
}

namespace {

// The arguments as an object when they are one (and not too deep to print), else the text.
ordered_json call_arguments(const std::string& arguments, bool object_arguments) {
  if (!object_arguments) return arguments;
  ordered_json parsed = ordered_json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || json_deeper_than(parsed, kMaxJsonDepth)) return arguments;
  return parsed;
}

}  // namespace

ordered_json template_messages(const std::vector<ChatMessage>& messages, bool object_arguments) {
  ordered_json list = ordered_json::array();
  for (const ChatMessage& message : messages) {
    ordered_json item = {{"role", message.role}};
    item["content"] = message.null_content ? ordered_json(nullptr) : ordered_json(message.content);
    if (!message.name.empty()) item["name"] = message.name;
    if (!message.tool_calls.empty()) {
      ordered_json calls = ordered_json::array();
      for (const ToolCall& call : message.tool_calls) {
        const ordered_json function = {{"name", call.name},
                                       {"arguments", call_arguments(call.arguments, object_arguments)}};
        calls.push_back({{"id", call.id}, {"type", "function"}, {"function", function}});
      }
      item["tool_calls"] = std::move(calls);
    }
    if (!message.tool_call_id.empty()) item["tool_call_id"] = message.tool_call_id;
    list.push_back(std::move(item));
  }
  return list;
}

ordered_json template_tools(const std::vector<ToolDefinition>& tools) {
  if (tools.empty()) return nullptr;
  ordered_json list = ordered_json::array();
  for (const ToolDefinition& tool : tools) {
    // The server refuses deeper parameters with a better message; this guards other callers.
    TANDEM_CHECK_INPUT(!json_deeper_than(tool.parameters, kMaxJsonDepth),
                       "the parameters of tool '{}' nest deeper than {} levels", tool.name.substr(0, 64),
                       kMaxJsonDepth);
    ordered_json function = {{"name", tool.name}};
    if (!tool.description.empty()) function["description"] = tool.description;
    if (!tool.parameters.is_null()) function["parameters"] = tool.parameters;
    list.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return list;
}

}  // namespace tandem::chat
