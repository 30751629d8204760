// A request body's JSON (internal to src/server): parsed in time linear in its size, under
// limits checked while it is read, so a hostile body is a 400 naming the limit it broke
// before it is built, never seconds of one worker's time or a DOM many times its size. A
// parse nobody waits for any more (the client left, the server stops) is abandoned.
// Produces what request_json.h reads; decides nothing about fields.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <string_view>

#include "server/request_json.h"

namespace tandem::server {

// What a body may hold. A string value has no limit of its own: a prompt may be most of a
// body, and the body is capped in bytes before it is read (--max-body-bytes).
struct JsonBodyLimits {
  int64_t max_depth = 256;          // nested objects and arrays (chat_request refuses tools past 64 itself)
  int64_t max_object_keys = 10000;  // keys of one object (logit_bias takes 1024; schemas a few hundred)
  int64_t max_key_bytes = 1024;     // one key's length
  int64_t max_values = 1 << 20;     // values of every kind, containers included: bounds the DOM's memory
};

// Thrown by parse_json_body when `abandoned` said so: nobody waits for this request any more.
class BodyAbandoned : public std::exception {
 public:
  const char* what() const noexcept override { return "the request was abandoned"; }
};

// Parses `text` as one JSON value. ApiError 400 for a syntax error or a number out of range
// ("the request body is not valid JSON: ...") and for a broken limit (the message names it).
// `abandoned` (optional) is asked every few thousand values; true stops the parse with
// BodyAbandoned. Duplicate keys keep their first position and their last value, as
// nlohmann's own parser leaves them. Keys stay in the client's order (ordered_json).
RequestJson parse_json_body(std::string_view text, const JsonBodyLimits& limits = {},
                            const std::function<bool()>& abandoned = {});

// A body that must be a JSON object (the endpoints outside parse_request: /tokenize, ...):
// parse_json_body, then a 400 "must be a JSON object" for any other value.
RequestJson parse_json_object(std::string_view text, const JsonBodyLimits& limits = {},
                              const std::function<bool()>& abandoned = {});

}  // namespace tandem::server
