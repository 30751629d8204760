// Reading a request body's JSON (internal to src/server): the 400 every malformed field
// becomes, the client's value quoted in it, and optional fields. Bodies are parsed as
// ordered_json so that what reaches a chat template (tool parameters) keeps the client's
// key order.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace tandem::server {

using RequestJson = nlohmann::ordered_json;

[[noreturn]] inline void bad(const std::string& message) { throw ApiError(400, "invalid_request_error", message); }

// A client's value as it appears in an error message: its JSON text, cut short when long.
inline std::string shown(const RequestJson& value) {
  std::string text = value.dump(-1, ' ', false, RequestJson::error_handler_t::replace);
  if (text.size() > 64) text = text.substr(0, 60) + "...";
  return text;
}

// The field if present and not null, else nullptr.
inline const RequestJson* field(const RequestJson& body, const char* name) {
  const auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// A body that must be a JSON object (the endpoints outside parse_request: /tokenize, ...);
// 400 "not valid JSON: <where>" or "must be a JSON object" otherwise.
inline RequestJson parse_json_object(std::string_view text) {
  RequestJson body;
  try {
    body = RequestJson::parse(text);
  } catch (const nlohmann::json::exception& e) {  // syntax errors and numbers out of range alike
    const std::string_view what = e.what();       // "[json.exception.parse_error.101] parse error at ..."
    const size_t close = what.find("] ");
    bad(fmt::format("the request body is not valid JSON: {}",
                    what.substr(close == std::string_view::npos ? 0 : close + 2)));
  }
  if (!body.is_object()) bad("the request body must be a JSON object");
  return body;
}

inline bool bool_field(const RequestJson& body, const char* name, bool fallback) {
  const RequestJson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(fmt::format("'{}' must be true or false, not {}", name, shown(*v)));
  return v->get<bool>();
}

}  // namespace tandem::server
