// llama-server's native endpoints as pure functions (no sockets, no engine): /completion and
// /infill bodies -> the completions request the generation path runs (llama-server's field
// names and defaults), finished or streamed results -> its response objects; /embedding bodies
// and responses; /rerank bodies. What is the same as /v1/completions (sampling fields, grammars,
// stops, field refusals) is parse_request's: a body is rewritten into a /v1/completions body,
// never parsed twice by different rules.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/embeddings_api.h"
#include "server/openai_protocol.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

// A /completion or /infill request: the completions request, and what only the native response
// shows.
struct NativeCompletionRequest {
  ApiRequest api;
  int32_t n_probs = 0;                    // completion_probabilities' alternatives per token (0: none)
  bool return_tokens = false;             // 'tokens' in the final result (stream chunks always carry them)
  std::vector<std::string> prompt_texts;  // per prompt, as the response's 'prompt' shows it
  nlohmann::json settings;                // 'generation_settings' (llama-server's names)
};

// /completion: `prompt` a string, token ids, ids and strings mixed ([12, "text", 34]: one prompt,
// its strings tokenized here, BOS only before a leading string) or several of those (an array of
// strings / arrays); n_predict (default -1: to the end of the context), n_probs (0..20),
// return_tokens, llama-server's sampling defaults (temperature 0.8, top_k 40, top_p 0.95, min_p
// 0.05, repeat_last_n 64; none of the truncations under mirostat), seed -1 as random,
// logit_bias also as llama-server's [[id, bias | false], ...]. Throws ApiError (400) naming the field.
NativeCompletionRequest parse_native_completion(std::string_view body, const Tokenizer& tokenizer,
                                                int64_t context_length, const SpeculationParams& speculation,
                                                const std::function<bool()>& abandoned = {});

// llama-server's generation_settings of a request (also each slot's params in /slots); n_predict
// as sent (-1: to the end of the context).
nlohmann::json generation_settings_json(const ApiRequest& api, int32_t n_probs, int64_t context_length,
                                        int64_t n_predict);

// The vocabulary's fill-in-the-middle tokens (tokenizer.ggml.fim_*_token_id, or the usual
// spellings of them among its control tokens); -1 where it has none.
struct FimTokens {
  int32_t prefix = -1, suffix = -1, middle = -1;  // needed for /infill
  int32_t repo = -1, file_sep = -1;               // optional: the repo-level layout of input_extra
};
FimTokens find_fim_tokens(const Tokenizer& tokenizer);

// /infill: /completion's fields, with the prompt built from input_prefix, input_suffix,
// input_extra ([{"filename", "text"}]) and prompt (after the middle token), as llama-server lays
// them out. A vocabulary without the prefix, suffix or middle token is a 400 naming which.
NativeCompletionRequest parse_infill(std::string_view body, const Tokenizer& tokenizer, int64_t context_length,
                                     const SpeculationParams& speculation, const std::function<bool()>& abandoned = {});
// The prompt's token ids, as parse_infill builds them (unit-tested alone).
std::vector<int32_t> infill_prompt(const Tokenizer& tokenizer, const FimTokens& fim, std::string_view prefix,
                                   std::string_view suffix,
                                   const std::vector<std::pair<std::string, std::string>>& extra,
                                   std::string_view prompt);

// One finished choice as the native response shows it.
struct NativeResult {
  int32_t index = 0;
  std::string content;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;
  FinishReason finish_reason = FinishReason::None;
  std::string stop_string;  // the stop string that ended it
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  double prefill_ms = 0.0, decode_ms = 0.0;
};

// The final result object: content, tokens, stop, stop_type ("eos", "limit", "word", "none")
// and the older stopped_eos / stopped_limit / stopped_word, stopping_word, tokens_predicted,
// tokens_evaluated, tokens_cached, truncated, timings, generation_settings, model, prompt,
// completion_probabilities (with n_probs).
nlohmann::json native_result_json(const NativeCompletionRequest& request, const NativeResult& result,
                                  const std::string& model);
// A streamed token's chunk: {"index", "content", "tokens", "stop": false, "id_slot",
// "tokens_predicted", "tokens_evaluated"} and its completion_probabilities with n_probs.
nlohmann::json native_chunk_json(const NativeCompletionRequest& request, int32_t index, const RequestEvent& event,
                                 int64_t tokens_predicted);
// llama-server's completion_probabilities: per token {id, token, bytes, logprob, top_logprobs}.
nlohmann::json completion_probabilities_json(const std::vector<TokenLogprob>& logprobs);
// llama-server's stop_type for a finish reason.
std::string_view native_stop_type(FinishReason reason);

// /embedding and /embeddings (llama-server's, not OpenAI's): `content` (or `input`) as
// /v1/embeddings' input, and embd_normalize (-1 none, 0 max absolute, 1 taxicab, 2 Euclidean, the
// default, p > 2 the p-norm). `normalize` is set to it.
EmbeddingsRequest parse_native_embedding(std::string_view body, const Tokenizer& tokenizer, int64_t d_model,
                                         int64_t context_length, int64_t max_inputs, std::string_view max_inputs_reason,
                                         int32_t& normalize, const std::function<bool()>& abandoned = {});
// Scales `vector` by its embd_normalize norm (llama.cpp's common_embd_normalize); all zeros stay.
void normalize_embedding(std::vector<float>& vector, int32_t norm);
// [{"index": i, "embedding": [[...], ...]}]: each vector cut into rows of `row_length` (0: one
// row, the pooled vector; d_model: per token, --pooling none), as llama-server nests them.
nlohmann::json native_embedding_json(const std::vector<std::vector<float>>& vectors, int64_t row_length = 0);

// /rerank, /reranking, /v1/rerank, /v1/reranking (llama-server's, Jina's shape): query,
// documents, top_n (default: all), return_documents. Each document becomes one sequence,
// [BOS] query [EOS] document [EOS] (llama-server's layout for a model without a rerank template,
// which has no separator token here), scored by the model's head (rank_head.h).
struct RerankRequest {
  std::string model;  // empty: not given
  std::vector<std::string> documents;
  int64_t top_n = 0;  // 0: every document
  bool return_documents = false;
  std::vector<std::vector<int32_t>> inputs;  // [documents]
};
// Checks the body (400s naming the field; at most `max_inputs` documents), then, for a model
// that cannot rank (`can_rank` false: no classification head), the 400 that says so.
RerankRequest parse_rerank(std::string_view body, const Tokenizer& tokenizer, int64_t context_length,
                           int64_t max_inputs, bool can_rank, const std::function<bool()>& abandoned = {});
// {"model", "object": "list", "usage", "results": [{"index", "relevance_score", "document": {"text"}}]},
// most relevant first, top_n of them.
nlohmann::json rerank_response_json(const RerankRequest& request, const std::vector<float>& scores,
                                    const std::string& model, int64_t prompt_tokens);

}  // namespace tandem::server
