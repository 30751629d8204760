// The names a server answers to (--served-model-name, vLLM's flag; llama-server's --alias):
// the first is the model's id in /v1/models and in every response, each one is accepted as a
// request's `model`. A wrong name is OpenAI's 404 model_not_found. Pure functions; no sockets.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tandem::server {

// The names from the flag's values, each of which may be a comma-separated list ("a,b" and
// "a" "b" alike), in order, duplicates dropped. Empty when no name was given: the server then
// answers to the model file's name. InputError for an empty name or one with control
// characters (it would be written into JSON and logs).
std::vector<std::string> parse_served_model_names(const std::vector<std::string>& values);

// Whether a request's `model` is one of `names`; an absent (empty) `model` is accepted, as
// the only model is meant.
bool model_name_accepted(const std::vector<std::string>& names, std::string_view requested);

// Throws ApiError(404, "invalid_request_error", model_not_found_message()) unless
// model_name_accepted().
void check_model_name(const std::vector<std::string>& names, std::string_view requested);
// "The model 'X' does not exist (this server serves 'a', 'b')".
std::string model_not_found_message(const std::vector<std::string>& names, std::string_view requested);

// The id in a request target "/v1/models/{id}[?query]", percent-decoded (SDKs escape the
// slashes of "org/model"; a malformed escape is kept as written); empty for any other target.
std::string model_id_from_target(std::string_view target);

// OpenAI's error code for a status and type this server sends, when there is one. ApiError
// carries no code, so it is derived here: the server's only 404 of type invalid_request_error
// is an unknown model ("model_not_found"); unknown paths are 404 not_found_error.
std::optional<std::string_view> openai_error_code(int status, std::string_view type);

// OpenAI's model object, with vLLM's max_model_len (the context per sequence).
nlohmann::json model_json(std::string_view id, int64_t context_length);

}  // namespace tandem::server
