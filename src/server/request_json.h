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

inline bool bool_field(const RequestJson& body, const char* name, bool fallback) {
  const RequestJson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(fmt::format("'{}' must be true or false, not {}", name, shown(*v)));
  return v->get<bool>();
}

}  // namespace tandem::server
