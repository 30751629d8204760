// OpenAI chat messages and function tools as the renderers take them (roles system,
// developer, user, assistant, tool; text content; assistant tool calls; tool results with
// the call they answer), and the JSON a Jinja chat template is given for them — what
// transformers' apply_chat_template receives. Checking a client's JSON is the server's job
// (server/chat_request.cpp); nothing here renders.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::chat {

// Deepest nesting of client JSON (tool parameters, parsed call arguments) that reaches a
// template: the template engine converts and prints it recursively.
constexpr int kMaxJsonDepth = 64;

// One function call an assistant made: OpenAI's {"id", "type": "function", "function":
// {"name", "arguments"}} (the type is always "function").
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments{};  // JSON text, as OpenAI sends it (a string, not an object)
};

// Members have initialisers so that {role, content} stays a complete aggregate.
struct ChatMessage {
  std::string role;     // system, developer, user, assistant or tool
  std::string content;  // the text; an array of text parts arrives joined
  // Content was null or absent (an assistant turn that only calls tools): templates see
  // None, as transformers users pass it, not "".
  bool null_content = false;
  std::string name{};                  // optional author or tool name; empty when absent
  std::vector<ToolCall> tool_calls{};  // assistant messages only
  std::string tool_call_id{};          // tool messages: the call this result answers
};

// One OpenAI function tool: {"type": "function", "function": {"name", "description",
// "parameters"}}.
struct ToolDefinition {
  std::string name;
  std::string description{};            // empty when absent
  nlohmann::ordered_json parameters{};  // a JSON Schema object, in the client's key order; null when absent
  bool strict = false;                  // OpenAI's structured-output flag; not rendered
};

// The messages as a template sees them: {"role", "content" (null when null_content),
// "name"?, "tool_calls"?: [{"id", "type": "function", "function": {"name", "arguments"}}],
// "tool_call_id"?}; keys without a value are left out ("tool_calls" in message is how
// templates tell an assistant call). With `object_arguments`, call arguments that parse as
// a JSON object (within kMaxJsonDepth) go in as that object — what transformers users pass
// and what templates printing `arguments | tojson` were written for; other arguments stay
// the string the client sent.
nlohmann::ordered_json template_messages(const std::vector<ChatMessage>& messages, bool object_arguments);

// [{"type": "function", "function": {"name", "description"?, "parameters"?}}], or null when
// there are none (templates test `tools is none`; transformers passes None).
nlohmann::ordered_json template_tools(const std::vector<ToolDefinition>& tools);

// Whether `value` nests arrays/objects deeper than `limit` levels (a scalar is level 0).
bool json_deeper_than(const nlohmann::ordered_json& value, int limit);

}  // namespace tandem::chat
