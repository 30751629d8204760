// llama-server's text utilities, as pure functions of a request body: POST /tokenize (text
// -> ids, optionally with each id's piece), POST /detokenize (ids -> text) and POST
// /apply-template (chat messages -> the prompt the chat endpoint would tokenize). Each throws
// ApiError (400) for a malformed body, naming the field; no sockets, no engine.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/chat_renderer.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

// {"content": string, "add_special": bool = false, "parse_special": bool = false,
//  "with_pieces": bool = false} -> {"tokens": [id, ...]}, or with pieces
// {"tokens": [{"id": id, "piece": text}, ...]} (a piece that is not whole UTF-8 — part of a
// character — is its byte values, as llama-server gives it). add_special adds BOS when the
// vocabulary adds one to prompts; parse_special matches control tokens written in the text
// (off by default: /v1/completions does not match them in a prompt either).
// The answer is written as JSON text as the ids are read, never as a DOM: with pieces, a DOM
// of a few million tokens would take gigabytes. `abandoned` (json_body.h) may stop the
// parse, or the tokenizing between its parts, with BodyAbandoned.
//
// vLLM's shapes too, told apart by their fields: {"prompt": string, "add_special_tokens": bool =
// true, "return_token_strs": bool = false} or {"messages": [...] (the chat endpoint's, with
// add_generation_prompt = true, continue_final_message, chat_template_kwargs, tools), ...} ->
// {"count": n, "max_model_len": context, "tokens": [id, ...], "token_strs": [piece, ...] or
// null}. Messages give the ids the chat endpoint feeds the model (BOS unless the template wrote
// it; add_special_tokens: false adds none). A chat body needs `vllm.renderer`.
struct VllmTokenizeContext {
  const chat::ChatRenderer* renderer = nullptr;  // null: a chat body is a 400
  nlohmann::ordered_json default_template_kwargs = nullptr;
  int64_t max_model_len = 0;
};
std::string tokenize_response(std::string_view body, const Tokenizer& tokenizer,
                              const std::function<bool()>& abandoned = {}, const VllmTokenizeContext& vllm = {});
// tokenize_response's answer as JSON (tests and small texts).
inline nlohmann::json tokenize_json(std::string_view body, const Tokenizer& tokenizer) {
  return nlohmann::json::parse(tokenize_response(body, tokenizer));
}

// {"tokens": [id, ...]} -> {"content": text, "prompt": text}: llama-server's answer and
// vLLM's (the requests are the same). Ids outside the vocabulary are a 400 that names them.
nlohmann::json detokenize_json(std::string_view body, const Tokenizer& tokenizer,
                               const std::function<bool()>& abandoned = {});

// {"messages": [...], "tools": [...]} (the chat endpoint's shapes, chat_request.h, with
// add_generation_prompt, continue_final_message and chat_template_kwargs over
// `default_template_kwargs`) -> {"prompt": text}, rendered by `renderer` as a chat request would be.
nlohmann::json apply_template_json(std::string_view body, const chat::ChatRenderer& renderer,
                                   const nlohmann::ordered_json& default_template_kwargs = nullptr,
                                   const std::function<bool()>& abandoned = {});

}  // namespace tandem::server
