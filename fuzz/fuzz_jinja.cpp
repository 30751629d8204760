// libFuzzer target for the chat-template engine: any template text must parse and render
// or throw InputError (TemplateError); crashes, sanitizer reports, hangs and runaway
// memory are the bugs it hunts. Seeds live in fuzz/seeds/fuzz_jinja/.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "chat/jinja/chat_template.h"

namespace {

// A fixed conversation with tools and a tool call, so templates have data to walk.
const nlohmann::ordered_json& fixed_messages() {
  static const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call12345", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}]},
    {"role": "tool", "tool_call_id": "call12345", "content": "{\"temp\": 21.5}"},
    {"role": "assistant", "content": "<think>ok</think>Sunny, 21.5 °C."}
  ])");
  return messages;
}

const nlohmann::ordered_json& fixed_tools() {
  static const auto tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"},
      "days": {"type": "integer"}}, "required": ["city"]}}}
  ])");
  return tools;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;  // long inputs add nothing but time
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const tandem::ChatTemplate chat_template(text);
    chat_template.render(fixed_messages(), fixed_tools(), true, "<s>", "</s>");
  } catch (const tandem::InputError&) {
  }
  return 0;
}
