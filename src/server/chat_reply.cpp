// Generated text -> content, reasoning and tool calls (see chat_reply.h).
#include "server/chat_reply.h"

#include "server/structured_output.h"

namespace tandem::server {

namespace {

// The syntax to read this request's replies with: calls only where tools were offered and
// the model may choose to call them.
chat::ToolCallSyntax reading_syntax(const ApiRequest& request, chat::ToolCallSyntax syntax) {
  const bool may_call = !request.tools.empty() && request.tool_choice.mode == ToolChoice::Mode::Auto;
  if (!may_call) syntax.format = chat::ToolCallFormat::kNone;
  return syntax;
}

}  // namespace

ChatReplyShaper::ChatReplyShaper(const ApiRequest& request, chat::ToolCallSyntax syntax, uint64_t id_seed)
    : request_(request), mode_(Mode::kPassThrough), syntax_(reading_syntax(request, syntax)), id_seed_(id_seed) {
  const chat::ToolCallSyntax reading = syntax_;
  if (forced_tool_call_schema(request)) {
    mode_ = Mode::kForced;
  } else if (!request.params.grammar &&
             (reading.format != chat::ToolCallFormat::kNone || reading.reasoning != chat::ReasoningTags::kNone)) {
    // A grammar-shaped reply (response_format, ...) is the client's format: it is not read.
    mode_ = Mode::kParsed;
    parser_.emplace(reading, id_seed);
  }
}

std::vector<nlohmann::json> ChatReplyShaper::deltas_of(const std::vector<chat::ToolCallStreamEvent>& events) {
  std::vector<nlohmann::json> deltas;
  for (const chat::ToolCallStreamEvent& event : events) {
    switch (event.kind) {
      case chat::ToolCallStreamEvent::Kind::kContent:
        if (!event.text.empty()) deltas.push_back({{"content", event.text}});
        break;
      case chat::ToolCallStreamEvent::Kind::kReasoning:
        if (!event.text.empty()) deltas.push_back({{"reasoning_content", event.text}});
        break;
      case chat::ToolCallStreamEvent::Kind::kToolCall:
        called_tools_ = true;
        deltas.push_back({{"tool_calls", nlohmann::json::array({nlohmann::json(chat::tool_call_delta_json(event))})}});
        break;
    }
  }
  return deltas;
}

std::vector<nlohmann::json> ChatReplyShaper::feed(const std::string& text) {
  switch (mode_) {
    case Mode::kPassThrough:
      if (text.empty()) return {};
      return {{{"content", text}}};
    case Mode::kForced: forced_text_ += text; return {};
    case Mode::kParsed: return deltas_of(parser_->feed(text));
  }
  return {};
}

std::vector<nlohmann::json> ChatReplyShaper::finish() {
  if (mode_ == Mode::kParsed) {
    std::vector<nlohmann::json> deltas = deltas_of(parser_->finish());
    errors_ = parser_->errors();
    return deltas;
  }
  if (mode_ != Mode::kForced) return {};
  const ChatReply reply = whole(forced_text_);
  std::vector<nlohmann::json> deltas;
  if (!reply.content.empty()) deltas.push_back({{"content", reply.content}});
  for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
    chat::ToolCallStreamEvent event;
    event.kind = chat::ToolCallStreamEvent::Kind::kToolCall;
    event.index = static_cast<int>(i);
    event.call = reply.tool_calls[i];
    deltas.push_back({{"tool_calls", nlohmann::json::array({nlohmann::json(chat::tool_call_delta_json(event))})}});
  }
  return deltas;
}

ChatReply ChatReplyShaper::whole(const std::string& text) {
  ChatReply reply;
  switch (mode_) {
    case Mode::kPassThrough: reply.content = text; break;
    case Mode::kForced: {
      bool cut = false;
      if (std::optional<std::vector<chat::ToolCall>> calls = forced_tool_calls(request_, text, id_seed_, &cut)) {
        reply.tool_calls = std::move(*calls);
        if (cut) errors_.push_back("the last forced tool call did not complete; returned the complete ones");
      } else {
        reply.content = text;  // cut short: the client sees what was written
        errors_.push_back("the forced tool call did not complete; returned as content");
      }
      break;
    }
    case Mode::kParsed: {
      chat::ParsedReply parsed = chat::parse_reply(syntax_, text, id_seed_);
      reply.content = std::move(parsed.content);
      reply.reasoning_content = std::move(parsed.reasoning_content);
      reply.tool_calls = std::move(parsed.tool_calls);
      errors_ = std::move(parsed.errors);
      break;
    }
  }
  called_tools_ = !reply.tool_calls.empty();
  return reply;
}

}  // namespace tandem::server
