// What a request's output must look like, as a grammar for the engine's sampler: OpenAI's
// response_format (json_object, json_schema), llama-server's `grammar` (GBNF) and top-level
// `json_schema`, vLLM's guided_json, guided_choice, guided_regex, guided_grammar and its
// `structured_outputs` object, and a chat request's tool_choice
// "required" or named function. And, for those tool choices, reading the constrained output
// back as tool calls. A request may ask for one of these at most.
//
// Forced tool calls follow vLLM's design rather than each template's own call syntax: the
// model writes plain JSON — a named function's arguments object, or for "required" an array
// of {"name", "parameters"} objects, one per call — so one grammar serves every template
// family, and the server wraps what was written into OpenAI tool calls.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_message.h"
#include "grammar/grammar.h"
#include "server/request_json.h"

namespace tandem::server {

// The grammar `body` asks the output to follow (null: none), compiled; `request` holds the
// parsed chat fields (tools, tool_choice, parallel_tool_calls). Throws ApiError (400) for two
// constraints at once, a malformed response_format, and a schema or grammar this server
// cannot compile (the message names the keyword or the line).
std::shared_ptr<const grammar::Grammar> output_grammar(const RequestJson& body, const ApiRequest& request);

// The JSON Schema tool_choice "required" / a named function constrains the output to (see
// above); nullopt for "auto" and "none".
std::optional<nlohmann::ordered_json> forced_tool_call_schema(const ApiRequest& request);

// A forced reply's text as tool calls, ids drawn from `id_seed`; nullopt when the text is not
// the JSON the grammar describes (the reply was cut short by max_tokens or a stop string)
// and holds no complete call. A "required" reply cut after one or more complete calls gives
// those calls, with `*cut` set (the cut one is dropped).
std::optional<std::vector<chat::ToolCall>> forced_tool_calls(const ApiRequest& request, const std::string& text,
                                                             uint64_t id_seed, bool* cut = nullptr);

}  // namespace tandem::server
