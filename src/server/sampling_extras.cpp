// Issue 35's request fields (see sampling_extras.h).
#include "server/sampling_extras.h"

#include <algorithm>

#include "base/error.h"
#include "engine/bad_words.h"
#include "engine/dry_penalty.h"

namespace tandem::server {
namespace {

// An array of non-empty strings, at most `max_count` of at most `max_bytes` each.
std::vector<std::string> string_list_field(const RequestJson& body, const char* name, size_t max_count,
                                           size_t max_bytes) {
  const RequestJson* v = field(body, name);
  if (!v) return {};
  if (!v->is_array())
    bad(fmt::format("'{}' must be an array of strings, not {}", name, shown(*v)), ErrorCode::InvalidType);
  if (v->size() > max_count) bad(fmt::format("'{}' may hold at most {} strings", name, max_count));
  std::vector<std::string> out;
  for (const RequestJson& item : *v) {
    if (!item.is_string())
      bad(fmt::format("'{}' must be an array of strings, not one holding {}", name, shown(item)),
          ErrorCode::InvalidType);
    const std::string& text = item.get_ref<const std::string&>();
    if (text.empty() || text.size() > max_bytes)
      bad(fmt::format("'{}' strings must have 1 to {} bytes, not {}", name, max_bytes, text.size()));
    out.push_back(text);
  }
  return out;
}

// Two names for one setting (llama-server's and vLLM's): the one given, and both only if equal.
double aliased_number(const RequestJson& body, const char* name, const char* alias, double fallback, double lo,
                      double hi) {
  const double a = number_field(body, name, fallback, lo, hi);
  const double b = number_field(body, alias, a, lo, hi);
  if (field(body, name) && field(body, alias) && a != b)
    bad(fmt::format("'{}' {} and '{}' {} are the same setting with different values; send one", alias, b, name, a));
  return b;
}

}  // namespace

int64_t max_tokens_with_n_predict(const RequestJson& body, const char* max_name, int64_t max_tokens) {
  if (!field(body, "n_predict")) return max_tokens;
  const int64_t n = int_field(body, "n_predict", -1, -1, INT64_MAX);
  if (n == 0)
    bad("'n_predict' 0 is not supported: a request here generates at least one token (-1: up to the context)");
  const int64_t limit = n < 0 ? INT64_MAX : n;
  if (field(body, max_name) && limit != max_tokens)
    bad(fmt::format("'n_predict' {} and '{}' {} disagree: they are the same limit; send one, or the same value", n,
                    max_name, max_tokens));
  return limit;
}

void parse_sampling_extras(const RequestJson& body, ApiRequest& request) {
  GenerationParams& p = request.params;
  SamplingParams& s = p.sampling;
  s.repetition_penalty =
      static_cast<float>(aliased_number(body, "repeat_penalty", "repetition_penalty", 1.0, 0.01, 10.0));
  s.repeat_last_n = static_cast<int32_t>(int_field(body, "repeat_last_n", s.repeat_last_n, -1, INT32_MAX));
  s.typical_p = static_cast<float>(number_field(body, "typical_p", 1.0, 0.0, 1.0));
  s.xtc_probability = static_cast<float>(number_field(body, "xtc_probability", 0.0, 0.0, 1.0));
  s.xtc_threshold = static_cast<float>(number_field(body, "xtc_threshold", 0.1, 0.0, 1.0));
  s.dry.multiplier = static_cast<float>(number_field(body, "dry_multiplier", 0.0, 0.0, 100.0));
  s.dry.base = static_cast<float>(number_field(body, "dry_base", 1.75, 1.0, 100.0));
  s.dry.allowed_length = static_cast<int32_t>(int_field(body, "dry_allowed_length", 2, 1, 1 << 20));
  s.dry.penalty_last_n = static_cast<int32_t>(int_field(body, "dry_penalty_last_n", -1, -1, INT32_MAX));
  request.dry_breakers = field(body, "dry_sequence_breakers")
                             ? string_list_field(body, "dry_sequence_breakers", kMaxDryBreakers, kMaxDryBreakerBytes)
                             : default_dry_breakers();
  // Mirostat replaces the truncation samplers (as llama.cpp ignores them under it): one of them
  // on as well is a 400 naming it, not a silently different answer.
  s.mirostat = static_cast<int32_t>(int_field(body, "mirostat", 0, 0, 2));
  s.mirostat_tau = static_cast<float>(number_field(body, "mirostat_tau", 5.0, 0.0, 1e6));
  s.mirostat_eta = static_cast<float>(number_field(body, "mirostat_eta", 0.1, 0.0, 1e6));
  if (s.mirostat != 0) {
    const std::pair<bool, const char*> filters[] = {{s.top_k > 0, "top_k"},
                                                    {s.top_p < 1.0f, "top_p"},
                                                    {s.min_p > 0.0f, "min_p"},
                                                    {s.typical_p < 1.0f, "typical_p"},
                                                    {s.xtc_probability > 0.0f, "xtc_probability"}};
    for (const auto& [on, name] : filters)
      if (on)
        bad(fmt::format("'{}' cannot be used with 'mirostat' {}: Mirostat replaces top-k, top-p, min-p, typical-p "
                        "and XTC (llama.cpp ignores them under it); send one or the other",
                        name, s.mirostat));
    if (p.speculation.type == SpeculationType::Draft)
      bad("'mirostat' cannot be used with a draft model's speculation (its state follows each sampled token): send "
          "\"speculative\": {\"type\": \"none\"} or \"ngram\"");
  }
  // A parameter of dynamic temperature, which is off (dynatemp_range other than 0 is refused).
  number_field(body, "dynatemp_exponent", 1.0, 0.0, 1e6);
  bool_field(body, "cache_prompt", true);

  p.include_stop_str_in_output = bool_field(body, "include_stop_str_in_output", false);
  p.detokenize.skip_special_tokens = bool_field(body, "skip_special_tokens", true);
  p.detokenize.spaces_between_special_tokens = bool_field(body, "spaces_between_special_tokens", true);
  request.bad_words = string_list_field(body, "bad_words", kMaxBadWords, kMaxBadWordBytes);
  for (const std::string& word : request.bad_words)
    if (word.find_first_not_of(' ') == std::string::npos) bad("'bad_words' holds a word of spaces alone");
  if (const RequestJson* allowed = field(body, "allowed_token_ids")) {
    if (!allowed->is_array())
      bad(fmt::format("'allowed_token_ids' must be an array of token ids, not {}", shown(*allowed)),
          ErrorCode::InvalidType);
    if (allowed->empty()) bad("'allowed_token_ids' is empty: no token could be sampled");
    if (allowed->size() > kMaxAllowedTokens)
      bad(fmt::format("'allowed_token_ids' may hold at most {} ids", kMaxAllowedTokens));
    for (const RequestJson& id : *allowed) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        bad(fmt::format("'allowed_token_ids' must hold token ids, not {}", shown(id)));
      s.allowed_tokens.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  request.tokens_as_ids = bool_field(body, "return_tokens_as_token_ids", false);
  request.truncate_prompt_tokens = int_field(body, "truncate_prompt_tokens", 0, -1, INT64_MAX);
  if (field(body, "truncate_prompt_tokens") && request.truncate_prompt_tokens == 0)
    bad("'truncate_prompt_tokens' must be -1 (the context) or at least 1, not 0");
  p.priority = int_field(body, "priority", 0, INT64_MIN, INT64_MAX);
  request.chat_template = string_field(body, "chat_template");
  if (field(body, "chat_template") && request.chat_template.empty()) bad("'chat_template' is empty");
  if (request.chat_template.size() > kMaxRequestTemplateBytes)
    bad(fmt::format("'chat_template' has {} bytes; at most {}", request.chat_template.size(),
                    kMaxRequestTemplateBytes));
}

void finish_sampling_extras(ApiRequest& request, const Tokenizer& tokenizer, const ServingCapabilities& serving) {
  GenerationParams& p = request.params;
  if (p.priority != 0 && !serving.priority_scheduling)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("'priority' {} needs priority scheduling: start the server with --scheduling-policy "
                               "priority (as vLLM's; without it requests are served first come, first served)",
                               p.priority),
                   "priority", ErrorCode::Unsupported);
  if (!request.chat_template.empty() && !serving.trust_request_chat_template)
    throw ApiError(400, "invalid_request_error",
                   "'chat_template' from a request is not accepted: a template is code the server runs; start the "
                   "server with --trust-request-chat-template to allow it (as vLLM's)",
                   "chat_template", ErrorCode::Unsupported);
  if (!serving.extended_params) {
    const SamplingParams& s = p.sampling;
    const std::pair<bool, const char*> used[] = {
        {s.typical_p < 1.0f, "typical_p"},
        {s.xtc_probability > 0.0f, "xtc_probability"},
        {s.dry.enabled(), "dry_multiplier"},
        {!request.bad_words.empty(), "bad_words"},
        {p.include_stop_str_in_output, "include_stop_str_in_output"},
        {!p.detokenize.skip_special_tokens, "skip_special_tokens"},
        {p.priority != 0, "priority"},
        {s.mirostat != 0, "mirostat"},
        {!s.allowed_tokens.empty(), "allowed_token_ids"},
    };
    for (const auto& [on, name] : used)
      if (on)
        throw ApiError(400, "invalid_request_error",
                       fmt::format("'{}' is not supported with --workers: the workers do not receive it", name), name,
                       ErrorCode::Unsupported);
  }
  for (int32_t id : p.sampling.allowed_tokens)
    if (id >= tokenizer.vocab().size())
      throw ApiError(
          400, "invalid_request_error",
          fmt::format("'allowed_token_ids' token id {} is outside the vocabulary of {}", id, tokenizer.vocab().size()),
          "allowed_token_ids", ErrorCode::InvalidValue);
  try {
    p.bad_words = bad_word_sequences(tokenizer, request.bad_words);
    if (p.sampling.dry.enabled()) p.sampling.dry.breakers = dry_breaker_sequences(tokenizer, request.dry_breakers);
  } catch (const InputError& e) {
    const std::string name = p.bad_words.empty() && !request.bad_words.empty() ? "bad_words" : "dry_sequence_breakers";
    throw ApiError(400, "invalid_request_error", fmt::format("'{}': {}", name, e.what()), name,
                   ErrorCode::InvalidValue);
  }
}

chat::ChatRenderer request_chat_renderer(const chat::ChatRenderer& base, const std::string& source) {
  chat::ChatRenderer renderer = base;
  renderer.jinja_template = source;
  renderer.compiled.reset();
  try {
    renderer.compile();
  } catch (const InputError& e) {
    throw ApiError(400, "invalid_request_error", fmt::format("'chat_template' does not parse: {}", e.what()),
                   "chat_template", ErrorCode::InvalidValue);
  }
  return renderer;
}

void truncate_prompt(std::vector<int32_t>& prompt, int64_t truncate, int64_t context_length) {
  if (truncate == 0) return;
  if (truncate > context_length)
    throw ApiError(
        400, "invalid_request_error",
        fmt::format("'truncate_prompt_tokens' {} is more than the context ({} tokens)", truncate, context_length),
        "truncate_prompt_tokens", ErrorCode::InvalidValue);
  const auto keep = static_cast<size_t>(truncate < 0 ? context_length : truncate);
  if (prompt.size() > keep) prompt.erase(prompt.begin(), prompt.end() - static_cast<std::ptrdiff_t>(keep));
}

}  // namespace tandem::server
