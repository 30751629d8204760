// Reading a request body's JSON (internal to src/server): the 400 every malformed field
// becomes, the client's value quoted in it, and optional fields. Bodies are parsed as
// ordered_json so that what reaches a chat template (tool parameters) keeps the client's
// key order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace tandem::server {

using RequestJson = nlohmann::ordered_json;

// The field a message is about: every field error here opens with the field's path in single
// quotes ('temperature', 'messages[0].role', as OpenAI's messages do), and that path is the
// error's `param`; empty when the message opens otherwise (a body that is not JSON).
inline std::string field_of_message(std::string_view message) {
  if (!message.starts_with('\'')) return {};
  const size_t close = message.find('\'', 1);
  const std::string_view path = message.substr(1, close == std::string_view::npos ? 0 : close - 1);
  if (path.empty() || path.find_first_of(" \"") != std::string_view::npos) return {};
  return std::string(path);
}

// A 400 invalid_request_error. Its param is the field the message opens with (field_of_message);
// `code` says what was wrong with that field (a message about no field has a null code).
[[noreturn]] inline void bad(const std::string& message, ErrorCode code = ErrorCode::InvalidValue) {
  std::string param = field_of_message(message);
  throw ApiError(400, "invalid_request_error", message, param, param.empty() ? ErrorCode::None : code);
}

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

inline bool bool_field(const RequestJson& body, const char* name, bool fallback) {
  const RequestJson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(fmt::format("'{}' must be true or false, not {}", name, shown(*v)), ErrorCode::InvalidType);
  return v->get<bool>();
}

// A number in [lo, hi] (finite), an integer in [lo, hi], a string: `fallback` (or empty) when
// absent or null, else a 400 naming the field.
inline double number_field(const RequestJson& body, const char* name, double fallback, double lo, double hi) {
  const RequestJson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(fmt::format("'{}' must be a number, not {}", name, shown(*v)), ErrorCode::InvalidType);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad(fmt::format("'{}' must be between {} and {}, not {}", name, lo, hi, shown(*v)));
  return x;
}

inline int64_t int_field(const RequestJson& body, const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const RequestJson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer())
    bad(fmt::format("'{}' must be an integer, not {}", name, shown(*v)), ErrorCode::InvalidType);
  const int64_t x = v->is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(v->get<uint64_t>(), INT64_MAX))
                                            : v->get<int64_t>();
  if (x < lo || x > hi) bad(fmt::format("'{}' must be between {} and {}, not {}", name, lo, hi, shown(*v)));
  return x;
}

inline std::string string_field(const RequestJson& body, const char* name) {
  const RequestJson* v = field(body, name);
  if (!v) return {};
  if (!v->is_string()) bad(fmt::format("'{}' must be a string, not {}", name, shown(*v)), ErrorCode::InvalidType);
  return v->get<std::string>();
}

}  // namespace tandem::server
