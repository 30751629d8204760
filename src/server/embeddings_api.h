// POST /v1/embeddings as pure functions (OpenAI's shapes; no sockets, no engine): the body
// becomes the inputs to embed, each a token sequence; pooled vectors become the response.
// `input` is a string, an array of strings, an array of token ids, or an array of arrays of
// ids; `encoding_format` "float" (default) or "base64" (little-endian float32, as OpenAI's
// clients decode it); `dimensions` only as the model's own width (no truncation is offered:
// the vectors are not trained for it). Malformed bodies are ApiError 400 naming the field.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace tandem::server {

struct EmbeddingsRequest {
  std::string model;                         // empty: not given
  std::vector<std::vector<int32_t>> inputs;  // tokenized (BOS as the vocabulary adds it to prompts)
  bool base64 = false;
};

// Parses and tokenizes. Each input must be non-empty, its ids in the vocabulary, at most
// `context_length` tokens; at most `max_inputs` inputs (counted before any is tokenized; the
// 400 ends with `max_inputs_reason`). `abandoned` (json_body.h) may stop the parse, or the
// work before tokenizing, with BodyAbandoned.
EmbeddingsRequest parse_embeddings_request(std::string_view body, const Tokenizer& tokenizer, int64_t d_model,
                                           int64_t context_length, int64_t max_inputs,
                                           std::string_view max_inputs_reason = {},
                                           const std::function<bool()>& abandoned = {});

// Scales `vector` to unit Euclidean length (left as is when it is all zeros), in double.
void normalize_l2(std::vector<float>& vector);

// {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] or
// base64}], "model": model, "usage": {"prompt_tokens": n, "total_tokens": n}}.
nlohmann::json embeddings_response_json(const std::vector<std::vector<float>>& vectors, bool base64,
                                        const std::string& model, int64_t prompt_tokens);

}  // namespace tandem::server
