// GenerationFormat: what differs between the endpoints that generate (completions, chat
// completions, responses) — how a body becomes the request the engine runs, and how results
// are written back, whole or streamed. Session::serve_generation (generation.cpp) does the
// rest alike for all of them: preparing on the worker pool, admission, the engine's events,
// the client's disconnects, the SSE transport.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace tandem::server {

class GenerationFormat {
 public:
  virtual ~GenerationFormat() = default;

  // Worker pool: the body -> the request (its endpoint is Completions or Chat: how the prompt
  // is built and the reply read), for a model of `context_length` tokens. Throws ApiError for
  // a bad body. `abandoned` as for parse_request.
  virtual ApiRequest parse(const std::string& body, int64_t context_length, const std::function<bool()>& abandoned) = 0;
  // The response's id ("chatcmpl-7", "resp_...").
  virtual std::string response_id(uint64_t serial) const = 0;

  // Not streamed: the finished choices -> the response body (JSON text).
  virtual std::string whole(const ResponseMeta& meta, const std::vector<Completion>& choices) = 0;

  // Streamed: the bytes one engine event of choice `index` yields (`deltas` as sse_chat_event
  // takes them; for completions, {"content": text}); `error` is set on a final event that
  // failed (a worker process failed, 503; or the request's grammar passed a limit, 400).
  virtual std::string stream_event(const ResponseMeta& meta, const RequestEvent& event,
                                   const std::vector<nlohmann::json>& deltas, bool first, bool called_tools,
                                   int32_t index) = 0;
  virtual std::string stream_error(const ResponseMeta& meta, const RequestEvent& event) = 0;
  // Once every choice has finished (their finish reasons and token counts in `choices`; no
  // text): the stream's end.
  virtual std::string stream_end(const ResponseMeta& meta, const std::vector<Completion>& choices) = 0;
};

}  // namespace tandem::server
