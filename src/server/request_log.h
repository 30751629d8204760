// The server's log lines: one per HTTP request (its id, method and path, status, and for
// generation requests the prompt, cached and generated tokens, queue time, TTFT), and any
// other message, as text or as one JSON object per line (--log-format). Pure formatting: the
// transport fills the entries and writes the lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::server {

enum class LogFormat { Text, Json };

// "text" or "json"; nullopt otherwise.
std::optional<LogFormat> log_format_from_name(std::string_view name);

// What is known of one request when it is answered.
struct RequestLogEntry {
  std::string id;         // the response id for generation requests ("cmpl-3"), else "req-<n>"
  std::string method;     // "POST"
  std::string path;       // the request target as sent (cut to 200 bytes)
  int status = 0;         // the HTTP status sent; 0 when none was (the client left first)
  double total_ms = 0.0;  // head received -> response written
  // Generation requests (/v1/completions, /v1/chat/completions) that reached the engine.
  bool generation = false;
  int32_t choices = 1;
  int64_t prompt_tokens = 0;      // each prompt once, however many choices
  int64_t cached_tokens = 0;      // prompt tokens served from the prefix cache, all choices
  int64_t completion_tokens = 0;  // all choices
  double queue_ms = 0.0;          // choice 0: arrival at the engine -> first admission
  double ttft_ms = 0.0;           // choice 0: arrival at the engine -> first token
  std::string finish_reason{};    // choice 0's ("stop", "length", "cancelled", ...)
  std::string error{};            // why a choice ended with finish reason "error" (a grammar limit, a worker)
};

// One line, ending in '\n'. Text: "tandem serve: request cmpl-3 POST /v1/completions 200
// prompt=5 cached=0 generated=16 queue_ms=0.1 ttft_ms=3.4 total_ms=25.1 finish=length".
// Json: {"time": "<UTC ISO 8601>", "level": "info", "event": "request", "id", "method",
// "path", "status", "total_ms", and for generation "choices", "prompt_tokens",
// "cached_tokens", "completion_tokens", "queue_ms", "ttft_ms", "finish_reason"}. A non-empty
// `error` adds ` error="..."` (a JSON string, so it cannot split the line) / "error".
std::string request_log_line(const RequestLogEntry& entry, LogFormat format);

// Any other message: text "tandem serve: <message>" ("tandem serve: warning: <message>" for
// levels other than info and debug), or {"time", "level", "message"}.
std::string log_message_line(std::string_view level, std::string_view message, LogFormat format);

}  // namespace tandem::server
