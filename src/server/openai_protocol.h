// OpenAI protocol: request JSON -> ApiRequest (typed, validated: every bad field is an
// ApiError with the HTTP status and an OpenAI error type) and engine results -> response
// JSON and SSE chunks. Pure functions of their inputs: no sockets, no engine calls.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_renderer.h"
#include "engine/generation_service.h"
#include "engine/speculation/speculation_params.h"

namespace tandem::server {

// The chat types the protocol carries (src/chat/).
using chat::ChatMessage;
using chat::ChatRenderer;
using chat::RenderedChat;
using chat::ToolDefinition;

// OpenAI's error `code`: what was wrong with the field named in `param` (None: null).
enum class ErrorCode {
  None,
  InvalidValue,           // "invalid_value": the right type, a value outside what is accepted
  InvalidType,            // "invalid_type": a string where a number belongs, ...
  MissingRequired,        // "missing_required_parameter"
  Unsupported,            // "unsupported_parameter": defined by OpenAI or another server, not served here
  ContextLengthExceeded,  // "context_length_exceeded": the prompt cannot fit the context
  ModelNotFound,          // "model_not_found"
};
// The code's text; empty for None.
std::string_view error_code_name(ErrorCode code);

// A request the server refuses; `status` is the HTTP status, `type` OpenAI's error type,
// `param` the request field it is about ("temperature", "messages[0].role"; empty: none, null in
// the error body) and `code` what was wrong with it.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = {},
           ErrorCode code = ErrorCode::None)
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)), code(code) {}
  int status;
  std::string type;
  std::string param;
  ErrorCode code;
};

enum class Endpoint { Completions, Chat };

// tool_choice. "required" and a named function constrain the output with a grammar
// (structured_output.h); "auto" reads calls from what the model chose to write; "none" reads none.
struct ToolChoice {
  enum class Mode { Auto, None, Required, Function };
  Mode mode = Mode::Auto;
  std::string function;  // Mode::Function: the tool that must be called
};

// One completions prompt: text, or token ids (when `ids` is not empty: parse_request refuses an
// empty array of ids).
struct PromptInput {
  std::string text;
  std::vector<int32_t> ids;
  // Control tokens written in the text ("<|im_start|>") are matched whole, as llama-server's
  // /completion tokenizes; OpenAI's /v1/completions keeps them plain text.
  bool parse_special = false;
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::string model;  // as sent; empty when absent
  // Completions: 1..kMaxPrompts prompts ("prompt" as a string or token ids: one; an array of
  // strings or of token-id arrays: several), each with its n choices.
  std::vector<PromptInput> prompts;
  std::vector<ChatMessage> messages;  // chat
  std::vector<ToolDefinition> tools;  // chat: function tools, rendered into the prompt
  ToolChoice tool_choice;             // chat
  bool parallel_tool_calls = true;    // chat: false: at most one call under tool_choice "required"
  chat::RenderOptions render;         // chat: prefill, add_generation_prompt, chat_template_kwargs (the request's)
  GenerationParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  // Choices (n) per prompt: each its own sequence, choice i of a prompt sampled with seed + i
  // (choice_seed()); the server caps n at --parallel. With several prompts the response's choices
  // are prompt-major: prompt p's choice i has index p * n + i.
  int32_t n = 1;
  bool echo = false;  // completions: the prompt's text leads each choice's text
  // Issue 35's fields that need the tokenizer or the server's flags (sampling_extras.h finishes
  // them): vLLM's bad_words and llama-server's dry_sequence_breakers as sent (turned into token
  // sequences in params), return_tokens_as_token_ids (logprob tokens as "token_id:N"),
  // truncate_prompt_tokens (0: none; -1: the context; n: keep the prompt's last n tokens) and
  // a per-request Jinja chat_template (empty: the server's).
  std::vector<std::string> bad_words;
  std::vector<std::string> dry_breakers;
  bool tokens_as_ids = false;
  int64_t truncate_prompt_tokens = 0;
  std::string chat_template;
  // Top-level fields this server neither uses nor refuses (vendor extensions, `user`, ...),
  // in the body's order: accepted, and printed by `tandem serve --verbose`.
  std::vector<std::string> ignored_fields;
};

// Parse and validate a request body. `default_max_tokens` applies when max_tokens is absent,
// `default_speculation` (the server's flags) for what the request's `speculative` object
// ({"type": "none" | "ngram" | "draft", "max", "min", "ngram_min", "ngram_max"}) leaves out.
// Throws ApiError (400) for malformed JSON, wrong types, out-of-range values (n outside
// 1..kMaxChoices, more than kMaxPrompts prompts), best_of other than n, a non-empty suffix, echo on chat or with
// logprobs, a field OpenAI, vLLM or llama-server define that this server does not support (named in the message: a
// client relying on it must not get a silently different answer), and chat messages or tools of the wrong shape
// (chat_request.h); the message names the field and quotes the value. Sampling extras: logit_bias, min_tokens,
// ignore_eos, stop_token_ids. The body's JSON is read by parse_json_body (json_body.h: linear time, limits), which
// `abandoned` may stop (BodyAbandoned).
constexpr int32_t kMaxChoices = 128;
constexpr int32_t kMaxPrompts = 128;  // completions prompts in one request, checked before any is read
ApiRequest parse_request(Endpoint endpoint, std::string_view body, int64_t default_max_tokens,
                         const SpeculationParams& default_speculation = {},
                         const std::function<bool()>& abandoned = {});

// The seed of choice `index` of a request sampled with `seed`: seed + index (wrapping), so that
// choice i reproduces alone as a request with n = 1 and that seed.
inline uint64_t choice_seed(uint64_t seed, int32_t index) { return seed + static_cast<uint64_t>(index); }

// {"error": {"message", "type", "param", "code"}}; an empty param and ErrorCode::None are null.
nlohmann::json error_json(std::string_view message, std::string_view type, std::string_view param = {},
                          ErrorCode code = ErrorCode::None);
// The error object of a request that failed once its stream had started (event.error: a worker
// failed under it, or its grammar passed a limit): the same object, param and code as the
// error body the request gets when it is not streamed.
nlohmann::json stream_error_json(const RequestEvent& event);
// JSON text; ill-formed UTF-8 (a token's partial character) becomes U+FFFD instead of throwing.
std::string dump_json(const nlohmann::json& json);

// What every response of one request shares.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::Completions;
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool logprobs = false;
  int32_t n = 1;               // choices per prompt: choice i is prompt i / n's (usage counts each prompt once)
  bool tokens_as_ids = false;  // logprob tokens as "token_id:N" (vLLM's return_tokens_as_token_ids)
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
  // What llama-server's native responses also show (llama_server_api.h): the sampled token ids,
  // the stop string that ended it, and the prompt's and the generation's milliseconds.
  std::vector<int32_t> tokens{};
  std::string stop_string{};
  double prefill_ms = 0.0, decode_ms = 0.0;
  // Chat: the reply shaped from `text` (when absent, the message's content is `text`); with
  // tool calls, finish_reason is "tool_calls" where the generation stopped by itself.
  std::optional<ChatReply> reply{};
};

// A choice's final event's counts, times and stop string, into its Completion.
void note_totals(Completion& completion, const RequestEvent& event);

// OpenAI's usage object, plus "speculative": {"drafted", "accepted"} when tokens were proposed.
nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens,
                          int64_t drafted_tokens = 0, int64_t accepted_tokens = 0);
// The usage of a request's choices: each prompt (and its cached tokens) once, as its first
// choice's (every meta.n-th), and the completion tokens of every choice.
nlohmann::json choices_usage(const ResponseMeta& meta, const std::vector<Completion>& choices);
// One choice per Completion, index 0.. in order; usage as choices_usage.
nlohmann::json response_json(const ResponseMeta& meta, const std::vector<Completion>& choices);
inline nlohmann::json response_json(const ResponseMeta& meta, const Completion& completion) {
  return response_json(meta, std::vector<Completion>{completion});
}

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

// Streams with several choices: sse_choice_event gives one choice's chunks for one event
// (`deltas` as for sse_chat_event; for completions, {"content": text}), with the choice's
// `index` and, on its final event, its finish chunk; sse_stream_end ends the stream once every
// choice has finished: the usage chunk when `usage` is not null, then "data: [DONE]".
std::string sse_choice_event(const ResponseMeta& meta, const RequestEvent& event,
                             const std::vector<nlohmann::json>& deltas, bool first, bool called_tools, int32_t index);
std::string sse_stream_end(const ResponseMeta& meta, const nlohmann::json& usage);

}  // namespace tandem::server
