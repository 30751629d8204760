// libFuzzer target for the tool-call parser (src/chat/tool_call_parser.h): any model output,
// in any format, must parse without crashing, and streaming it in pieces must give what the
// whole text gives (the property the server's streamed replies rely on); a difference traps.
// Input: byte 0 picks the format and reasoning tags, byte 1 the piece length, the rest is the
// reply. Seeds live in fuzz/seeds/fuzz_tool_call_parser/.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat/tool_call_parser.h"

namespace {

using tandem::chat::ParsedReply;
using tandem::chat::StreamingToolCallParser;
using tandem::chat::ToolCallStreamEvent;

void take(const std::vector<ToolCallStreamEvent>& events, ParsedReply* reply) {
  for (const ToolCallStreamEvent& event : events) {
    if (event.kind == ToolCallStreamEvent::Kind::kContent) reply->content += event.text;
    if (event.kind == ToolCallStreamEvent::Kind::kReasoning) reply->reasoning_content += event.text;
    if (event.kind == ToolCallStreamEvent::Kind::kToolCall) reply->tool_calls.push_back(event.call);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 1 << 14) return 0;  // long inputs add nothing but time
  constexpr int kFormats = static_cast<int>(tandem::chat::ToolCallFormat::kDeepSeekR1) + 1;
  const tandem::chat::ToolCallSyntax syntax{static_cast<tandem::chat::ToolCallFormat>(data[0] % kFormats),
                                            static_cast<tandem::chat::ReasoningTags>(data[0] / kFormats % 3)};
  const size_t piece = data[1] % 16 + 1;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  const ParsedReply whole = tandem::chat::parse_reply(syntax, text, 1);
  StreamingToolCallParser parser(syntax, 1);
  ParsedReply streamed;
  for (size_t pos = 0; pos < text.size(); pos += piece) take(parser.feed(text.substr(pos, piece)), &streamed);
  take(parser.finish(), &streamed);
  bool same = streamed.content == whole.content && streamed.reasoning_content == whole.reasoning_content &&
              streamed.tool_calls.size() == whole.tool_calls.size() && parser.errors() == whole.errors;
  for (size_t i = 0; same && i < whole.tool_calls.size(); ++i)
    same = streamed.tool_calls[i].id == whole.tool_calls[i].id &&
           streamed.tool_calls[i].name == whole.tool_calls[i].name &&
           streamed.tool_calls[i].arguments == whole.tool_calls[i].arguments;
  if (!same) __builtin_trap();
  return 0;
}
