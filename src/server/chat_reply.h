// A chat request's generated text -> what its client is sent: content, reasoning_content and
// tool_calls, whole (a JSON response) or as stream deltas. Which reading applies:
//  - tool_choice "required" or a named function: the grammar made the model write plain JSON
//    (structured_output.h), read back as the calls;
//  - tools offered with tool_choice "auto": the calls the model wrote in its template's own
//    syntax (chat/tool_call_parser.h), and reasoning split off where the template has it;
//  - otherwise the reasoning split alone where the template has one, else the text as it is.
// The model's text is never lost: what does not parse as a call stays content.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/tool_call_parser.h"
#include "server/openai_protocol.h"

namespace tandem::server {

class ChatReplyShaper {
 public:
  // `syntax`: how the chat template's model writes calls and reasoning. Call ids are drawn
  // from `id_seed` (the server seeds randomly, so ids stay unique across a conversation).
  ChatReplyShaper(const ApiRequest& request, chat::ToolCallSyntax syntax, uint64_t id_seed);

  // Stream: the delta objects ({"content"}, {"reasoning_content"} or {"tool_calls": [one
  // call]}) that `text`, the next piece of the reply, releases; then finish() for the rest.
  std::vector<nlohmann::json> feed(const std::string& text);
  std::vector<nlohmann::json> finish();

  // Not streamed: the whole reply at once.
  ChatReply whole(const std::string& text);

  // Whether the reply held tool calls (so far): finish_reason "tool_calls".
  bool called_tools() const { return called_tools_; }
  // Lines for the server's log: calls the model wrote that did not parse.
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  enum class Mode { kPassThrough, kForced, kParsed };
  std::vector<nlohmann::json> deltas_of(const std::vector<chat::ToolCallStreamEvent>& events);

  const ApiRequest& request_;
  Mode mode_;
  chat::ToolCallSyntax syntax_;  // what kParsed reads: calls only when the model may choose them
  uint64_t id_seed_;
  std::optional<chat::StreamingToolCallParser> parser_;  // kParsed
  std::string forced_text_;                              // kForced: held until the end
  bool called_tools_ = false;
  std::vector<std::string> errors_;
};

}  // namespace tandem::server
