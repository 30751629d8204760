// OpenAI's Responses API (POST /v1/responses) as a protocol over the chat path: a request's
// `input` (text, or messages and function_call / function_call_output items), `instructions`,
// flat function `tools`, `tool_choice`, `text.format` and sampling fields become the chat
// request the engine runs (rendered, constrained and read back as /v1/chat/completions does);
// the reply becomes a response object with output items (message, reasoning, function_call),
// whole or as the Responses stream events (response.created ... response.completed, each with
// its sequence_number). Fields this server cannot honour are a 400 naming them. Pure
// functions of their inputs plus the response store (responses_store.h): no sockets.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"
#include "server/responses_store.h"

namespace tandem::server {

struct ResponsesRequest {
  ApiRequest api;  // the chat request the engine runs (endpoint Chat; instructions first)
  // The conversation without the instructions: the stored earlier turns (previous_response_id)
  // and this request's input. Stored, with the reply, as the next turn's history.
  std::vector<ChatMessage> history;
  bool store = true;
  std::string previous_response_id;
  // The request's settings as the response object repeats them (instructions, tools, text, ...).
  nlohmann::json echo = nlohmann::json::object();
};

// Parses and validates a /v1/responses body. `default_max_tokens` applies without
// max_output_tokens; `store` resolves previous_response_id and item_reference inputs.
// Throws ApiError: 400 naming the field for a malformed or unsupported one, 404 for a
// previous_response_id or referenced item this server does not hold.
ResponsesRequest parse_responses_request(std::string_view body, int64_t default_max_tokens,
                                         const SpeculationParams& default_speculation, const ResponsesStore& store,
                                         const std::function<bool()>& abandoned = {});

// "resp_", "msg_", "fc_", "rs_" + 48 random hex digits.
std::string random_item_id(std::string_view prefix);

// One response's output, whole or streamed, and what is stored of it.
class ResponseBuilder {
 public:
  ResponseBuilder(const ResponsesRequest& request, std::string id, int64_t created_at, std::string model);

  const std::string& id() const { return id_; }

  // Not streamed: the response object for the finished reply.
  nlohmann::json whole(const Completion& completion);

  // Streamed: response.created and response.in_progress.
  std::string stream_start();
  // The events the chat deltas ({"content"}, {"reasoning_content"}, {"tool_calls": [call]})
  // of the reply so far release.
  std::string stream_deltas(const std::vector<nlohmann::json>& deltas);
  // The final event: the open item's closing events, then response.completed (or
  // response.incomplete when max_output_tokens cut the reply, or response.failed with
  // `error` when the generation failed).
  // `totals`: the finish reason and token counts (its text is not read).
  std::string stream_finish(const Completion& totals, const std::string& error = {});

  // What the store keeps of the finished response (its conversation, output items and object).
  StoredResponse stored() const;

 private:
  struct Item {
    enum class Kind { Message, Reasoning, FunctionCall };
    Kind kind = Kind::Message;
    std::string id;
    std::string text;  // message, reasoning
    std::string call_id, name, arguments;
    bool incomplete = false;
  };
  nlohmann::json item_json(const Item& item, bool done) const;
  nlohmann::json response_json(std::string_view status, const nlohmann::json& usage,
                               const nlohmann::json& incomplete_details, const nlohmann::json& error) const;
  std::string event(std::string_view type, nlohmann::json fields);
  std::string open_item(Item::Kind kind);
  std::string close_item();
  void set_usage(int64_t prompt_tokens, int64_t cached_tokens, int64_t completion_tokens);

  const ResponsesRequest& request_;
  std::string id_;
  int64_t created_at_;
  std::string model_;
  std::vector<Item> items_;
  int open_ = -1;  // stream: the index of the item receiving deltas
  int64_t sequence_ = 0;
  nlohmann::json usage_ = nullptr;
  nlohmann::json final_ = nullptr;  // the finished response object (whole, or the stream's last event's)
};

}  // namespace tandem::server
