// Which top-level fields /v1/completions and /v1/chat/completions take, and what each gets: read
// (honoured), refused with why (a client relying on it must not get a silently different
// answer), accepted only with the value that asks for what this server does anyway, vendor
// metadata (accepted and listed in ApiRequest::ignored_fields: nothing about the answer depends
// on it), or a field of the other endpoint (refused). A field no rule names is a vendor
// extension: accepted and listed. tests/server/request_field_inventory_test.cpp checks every
// field OpenAI, vLLM and llama-server define against this table.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "server/openai_protocol.h"
#include "server/request_json.h"

namespace tandem::server {

enum class FieldKind {
  Honoured,     // read by parse_request (or by the server, as for priority and chat_template)
  DefaultOnly,  // accepted only with one of `accepted`, else a 400 with `why`
  Refused,      // a 400 with `why`
  Metadata,     // accepted and listed: `why` says why the answer cannot depend on it
};

inline constexpr uint8_t kCompletionsOnly = 1, kChatOnly = 2, kBothEndpoints = 3;

struct FieldRule {
  std::string_view name;
  FieldKind kind;
  uint8_t endpoints = kBothEndpoints;  // where the rule applies; elsewhere the field is the other endpoint's
  std::string_view why{};
  std::string_view accepted{};  // DefaultOnly: a JSON array of the values accepted
};

// Every rule, in no particular order. A name may have one rule per endpoint.
std::span<const FieldRule> request_field_rules();
// The rule for `name` on `endpoint`; null when no rule names it there.
const FieldRule* find_field_rule(Endpoint endpoint, std::string_view name);

// Applies the rules to every non-null top-level field of `body`: throws ApiError (400,
// unsupported_parameter, naming the field) for a refused field, a default-only field with
// another value, or a field of the other endpoint; appends metadata and unknown fields to
// request.ignored_fields.
void check_fields(Endpoint endpoint, const RequestJson& body, ApiRequest& request);

}  // namespace tandem::server
