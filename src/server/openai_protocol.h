// OpenAI protocol: request JSON -> ApiRequest (typed, validated: every bad field is an
// ApiError with the HTTP status and an OpenAI error type) and engine results -> response
// JSON and SSE chunks. Pure functions of their inputs: no sockets, no engine calls.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_renderer.h"
#include "engine/engine.h"

namespace tandem::server {

// The chat types the protocol carries (src/chat/).
using chat::ChatMessage;
using chat::ChatRenderer;
using chat::RenderedChat;
using chat::ToolDefinition;

// A request the server refuses; `status` is the HTTP status, `type` OpenAI's error type.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message)
      : std::runtime_error(message), status(status), type(std::move(type)) {}
  int status;
  std::string type;
};

enum class Endpoint { Completions, Chat };

// tool_choice. "required" and a named function constrain the output with a grammar
// (structured_output.h); "auto" reads calls from what the model chose to write; "none" reads none.
struct ToolChoice {
  enum class Mode { Auto, None, Required, Function };
  Mode mode = Mode::Auto;
  std::string function;  // Mode::Function: the tool that must be called
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;                  // as sent; empty when absent
  std::string prompt;                 // completions: the text (when prompt_ids is empty)
  std::vector<int32_t> prompt_ids;    // completions: the prompt given as token ids
  std::vector<ChatMessage> messages;  // chat
  std::vector<ToolDefinition> tools;  // chat: function tools, rendered into the prompt
  ToolChoice tool_choice;             // chat
  bool parallel_tool_calls = true;    // chat: false: at most one call under tool_choice "required"
  GenerationParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  // Top-level fields this server neither uses nor refuses (vendor extensions, `user`, ...),
  // in the body's order: accepted, and printed by `tandem serve --verbose`.
  std::vector<std::string> ignored_fields;
};

// Parse and validate a request body. `default_max_tokens` applies when max_tokens is absent,
// `default_speculation` (the server's flags) for what the request's `speculative` object
// ({"type": "none" | "ngram" | "draft", "max", "min", "ngram_min", "ngram_max"}) leaves out.
// Throws ApiError (400) for malformed JSON, wrong types, out-of-range values, n != 1, a field
// OpenAI, vLLM or llama-server define that this server does not support (named in the
// message: a client relying on it must not get a silently different answer), and chat
// messages or tools of the wrong shape (chat_request.h); the message names the field and
// quotes the value. Sampling extras: logit_bias, min_tokens, ignore_eos, stop_token_ids.
ApiRequest parse_request(Endpoint endpoint, std::string_view body, int64_t default_max_tokens,
                         const SpeculationParams& default_speculation = {});

// {"error": {"message", "type", "code"}}
nlohmann::json error_json(std::string_view message, std::string_view type);
// JSON text; ill-formed UTF-8 (a token's partial character) becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& json);

// What every response of one request shares.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;
};

// A chat reply as the client sees it (server/chat_reply.h shapes it from the text).
struct ChatReply {
  std::string content;            // null in the JSON when empty and there are tool calls
  std::string reasoning_content;  // left out when empty
  std::vector<chat::ToolCall> tool_calls{};
};

// A whole (non-streamed) result, accumulated from the events.
struct Completion {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  FinishReason finish_reason = FinishReason::None;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  // Chat: the reply shaped from `text` (when absent, the message's content is `text`); with
  // tool calls, finish_reason is "tool_calls" where the generation stopped by itself.
  std::optional<ChatReply> reply{};
};

// OpenAI's usage object, plus "speculative": {"drafted", "accepted"} when tokens were proposed.
nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
                          int64_t drafted_tokens = 0, int64_t accepted_tokens = 0);
nlohmann::json response_json(const ResponseMeta& meta, const Completion& completion);

// SSE framing: "data: <json>\n\n". For a stream, call sse_event for every engine event: it
// returns the chunks that event yields (content, then on the last one the finish chunk, the
// usage chunk when asked for, and "data: [DONE]").
std::string sse_data(const nlohmann::json& json);
std::string sse_event(const ResponseMeta& meta, const RequestEvent& event, bool first, bool include_usage);
// The same for a chat stream whose reply is shaped (chat_reply.h): `deltas` are the delta
// objects this event released (the event's logprobs go with the first); `called_tools` makes
// the final finish_reason "tool_calls" where the generation stopped by itself.
std::string sse_chat_event(const ResponseMeta& meta, const RequestEvent& event,
                           const std::vector<nlohmann::json>& deltas, bool first, bool include_usage,
                           bool called_tools);

}  // namespace tandem::server
