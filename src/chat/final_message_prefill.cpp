// Assistant prefill by marking and cutting (see final_message_prefill.h).
#include "chat/final_message_prefill.h"

#include <algorithm>
#include <string_view>

#include "base/error.h"

namespace tandem::chat {
namespace {

// Printable ASCII that no template trims (Python's strip() also strips \x1c..\x1f, so no
// control characters), escapes or is likely to meet in a conversation; a client that writes
// it anyway gets the "exactly once" error rather than a wrong cut.
constexpr std::string_view kFinalMessageEnd = "<<tandem:final-message-end:7c1e>>";

// Where the marker is, or npos unless it occurs exactly once.
size_t marker_position(const std::string& text) {
  const size_t at = text.find(kFinalMessageEnd);
  const bool once = at != std::string::npos && text.find(kFinalMessageEnd, at + 1) == std::string::npos;
  TANDEM_CHECK_INPUT(once,
                     "this chat template does not print the final assistant message's content in a place where it "
                     "can be continued (send continue_final_message: false to close that turn instead)");
  return at;
}

}  // namespace

std::vector<ChatMessage> mark_final_message(const std::vector<ChatMessage>& messages) {
  TANDEM_CHECK_INPUT(!messages.empty() && messages.back().role == "assistant",
                     "continuing the final message needs the last message to be the assistant's, not {}",
                     messages.empty() ? std::string("an empty conversation") : "'" + messages.back().role + "'");
  TANDEM_CHECK_INPUT(messages.back().tool_calls.empty(),
                     "the final assistant message has tool_calls, so it cannot be continued as text");
  std::vector<ChatMessage> marked = messages;
  ChatMessage& last = marked.back();
  last.null_content = false;
  last.content += kFinalMessageEnd;
  return marked;
}

RenderedChat cut_at_final_message(RenderedChat chat) {
  const size_t cut = marker_position(chat.text);
  chat.text.resize(cut);
  std::vector<TextSpan> spans;
  for (TextSpan span : chat.special_spans) {
    if (span.begin >= cut) break;
    span.end = std::min(span.end, cut);
    spans.push_back(span);
  }
  chat.special_spans = std::move(spans);
  return chat;
}

std::string cut_at_final_message(const std::string& text) { return text.substr(0, marker_position(text)); }

}  // namespace tandem::chat
