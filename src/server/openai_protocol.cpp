// OpenAI JSON <-> engine types (see openai_protocol.h). Validation is strict about types
// (a string where a number belongs is a 400, not a silent default), lenient about unknown
// fields (clients send many we do not use). The chat fields are chat_request.cpp's.
#include "server/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "base/error.h"
#include "server/chat_request.h"
#include "server/json_body.h"
#include "server/request_fields.h"
#include "server/request_json.h"
#include "server/sampling_extras.h"
#include "server/structured_output.h"

namespace tandem::server {

using nlohmann::json;

namespace {

// An integer JSON value that fits a token id (0..INT32_MAX), judged on the value as sent.
bool token_id_in_range(const RequestJson& id) {
  return id.is_number_unsigned() ? id.get<uint64_t>() <= INT32_MAX
                                 : id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX;
}

std::vector<std::string> stop_field(const RequestJson& body) {
  const RequestJson* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > 16) bad("'stop' may hold at most 16 strings");
    for (const RequestJson& s : *v) {
      if (!s.is_string()) bad("'stop' must be a string or an array of strings", ErrorCode::InvalidType);
      stops.push_back(s.get<std::string>());
    }
  } else {
    bad("'stop' must be a string or an array of strings", ErrorCode::InvalidType);
  }
  for (const std::string& s : stops)
    if (s.empty()) bad("'stop' strings must not be empty");
  return stops;
}

// nlohmann's message without its "[json.exception.parse_error.101] " prefix: what the client
// sent and where, not which library said so.
std::string json_error_text(const json::exception& e) {
  const std::string_view what = e.what();
  const size_t close = what.find("] ");
  return std::string(what.substr(close == std::string_view::npos ? 0 : close + 2));
}

ApiRequest parse_fields(Endpoint endpoint, const RequestJson& body, int64_t default_max_tokens,
                        const SpeculationParams& default_speculation);

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}.
std::vector<std::pair<int32_t, float>> logit_bias_field(const RequestJson& body) {
  const RequestJson* v = field(body, "logit_bias");
  if (!v) return {};
  if (!v->is_object())
    bad(fmt::format("'logit_bias' must be an object of token id -> bias, not {}", shown(*v)), ErrorCode::InvalidType);
  if (v->size() > 1024) bad("'logit_bias' may hold at most 1024 tokens");
  std::vector<std::pair<int32_t, float>> biases;
  for (const auto& [key, bias] : v->items()) {
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id > INT32_MAX) bad(fmt::format("'logit_bias' keys must be token ids, not \"{}\"", key));
    if (!bias.is_number() || !std::isfinite(bias.get<double>()) || bias.get<double>() < -100.0 ||
        bias.get<double>() > 100.0)
      bad(fmt::format("'logit_bias' values must be numbers between -100 and 100, not {}", shown(bias)));
    biases.emplace_back(static_cast<int32_t>(id), bias.get<float>());
  }
  return biases;
}

std::vector<int32_t> stop_token_ids_field(const RequestJson& body) {
  const RequestJson* v = field(body, "stop_token_ids");
  if (!v) return {};
  if (!v->is_array())
    bad(fmt::format("'stop_token_ids' must be an array of token ids, not {}", shown(*v)), ErrorCode::InvalidType);
  if (v->size() > 256) bad("'stop_token_ids' may hold at most 256 ids");
  std::vector<int32_t> ids;
  for (const RequestJson& id : *v) {
    if (!id.is_number_integer() || !token_id_in_range(id))
      bad(fmt::format("'stop_token_ids' must hold token ids, not {}", shown(id)));
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

// Token ids as sent, checked one by one: `where` names the prompt in messages ('prompt', 'prompt[2]').
std::vector<int32_t> token_ids(const RequestJson& ids, const std::string& where) {
  // Never empty: an empty PromptInput::ids means text.
  if (ids.empty()) bad(fmt::format("'{}' is an empty array of token ids (a prompt needs at least one)", where));
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (const RequestJson& id : ids) {
    if (!id.is_number_integer())
      bad(fmt::format("'{}' token ids must be integers, not {}", where, shown(id)), ErrorCode::InvalidType);
    // Quote the id as sent: a clamped or wrapped value would name a token the client never wrote.
    if (!token_id_in_range(id)) bad(fmt::format("'{}' token id {} is out of range", where, shown(id)));
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

// Completions' prompt: a string or an array of token ids (one prompt), or an array of strings or
// of token-id arrays (several, at most kMaxPrompts, counted before any is read).
std::vector<PromptInput> prompts_field(const RequestJson& body) {
  const RequestJson* prompt = field(body, "prompt");
  if (!prompt) bad("'prompt' is required", ErrorCode::MissingRequired);
  if (prompt->is_string()) return {PromptInput{.text = prompt->get<std::string>(), .ids = {}}};
  constexpr std::string_view kShapes =
      "a string, an array of strings, an array of token ids or an array of token-id arrays";
  if (!prompt->is_array())
    bad(fmt::format("'prompt' must be {}, not {}", kShapes, shown(*prompt)), ErrorCode::InvalidType);
  if (prompt->empty()) bad("'prompt' must not be an empty array");
  if ((*prompt)[0].is_number()) return {PromptInput{.text = {}, .ids = token_ids(*prompt, "prompt")}};
  if (prompt->size() > static_cast<size_t>(kMaxPrompts))
    bad(fmt::format("'prompt' holds {} prompts; at most {} per request", prompt->size(), kMaxPrompts));
  const bool texts = (*prompt)[0].is_string();
  std::vector<PromptInput> prompts;
  for (size_t i = 0; i < prompt->size(); ++i) {
    const RequestJson& item = (*prompt)[i];
    const std::string where = fmt::format("prompt[{}]", i);
    if (texts && item.is_string()) {
      prompts.push_back({.text = item.get<std::string>(), .ids = {}});
    } else if (!texts && item.is_array()) {
      prompts.push_back({.text = {}, .ids = token_ids(item, where)});
    } else {
      bad(fmt::format("'{}' is {}: 'prompt' must be {} (not a mix)", where, shown(item), kShapes),
          ErrorCode::InvalidType);
    }
  }
  return prompts;
}
}  // namespace

ApiRequest parse_request(Endpoint endpoint, std::string_view body_text, int64_t default_max_tokens,
                         const SpeculationParams& default_speculation, const std::function<bool()>& abandoned) {
  const RequestJson body = parse_json_object(body_text, {}, abandoned);
  try {
    return parse_fields(endpoint, body, default_max_tokens, default_speculation);
  } catch (const json::exception& e) {  // a type mismatch a check above missed is still the client's
    bad("the request does not have the expected shape: " + json_error_text(e));
  }
}

namespace {

// The request's `speculative` object over the server's defaults (a Tandem extension).
SpeculationParams speculation_field(const RequestJson& body, const SpeculationParams& defaults) {
  const RequestJson* v = field(body, "speculative");
  if (!v) return defaults;
  if (!v->is_object()) bad(fmt::format("'speculative' must be an object, not {}", shown(*v)), ErrorCode::InvalidType);
  SpeculationParams s = defaults;
  if (const RequestJson* type = field(*v, "type")) {
    if (!type->is_string())
      bad(fmt::format("'speculative.type' must be a string, not {}", shown(*type)), ErrorCode::InvalidType);
    try {
      s.type = speculation_type_from_name(type->get<std::string>());
    } catch (const InputError& e) {
      bad(fmt::format("'speculative.type': {}", e.what()));
    }
  }
  s.draft_max = static_cast<int32_t>(int_field(*v, "max", s.draft_max, 0, kMaxDraftTokens));
  s.draft_min = static_cast<int32_t>(int_field(*v, "min", std::min(s.draft_min, s.draft_max), 0, kMaxDraftTokens));
  s.ngram_min = static_cast<int32_t>(int_field(*v, "ngram_min", s.ngram_min, 1, 16));
  s.ngram_max = static_cast<int32_t>(int_field(*v, "ngram_max", std::max(s.ngram_max, s.ngram_min), 1, 16));
  try {
    check_speculation(s);
  } catch (const InputError& e) {
    bad(fmt::format("'speculative': {}", e.what()));
  }
  return s;
}

ApiRequest parse_fields(Endpoint endpoint, const RequestJson& body, int64_t default_max_tokens,
                        const SpeculationParams& default_speculation) {
  ApiRequest request;
  request.endpoint = endpoint;
  check_fields(endpoint, body, request);
  request.model = string_field(body, "model");
  request.n = static_cast<int32_t>(int_field(body, "n", 1, 1, kMaxChoices));
  // best_of > n generates candidates and returns the n most probable: not done here, and
  // answering with n plain samples instead would be a silently different answer.
  const int64_t best_of = int_field(body, "best_of", request.n, 1, kMaxChoices);
  if (best_of != request.n)
    bad(fmt::format("'best_of' {} is not supported: only best_of = n ({}), since ranking extra candidates by "
                    "log probability is not implemented",
                    best_of, request.n),
        ErrorCode::Unsupported);
  request.echo = bool_field(body, "echo", false);
  if (request.echo && endpoint == Endpoint::Chat) bad("'echo' is a /v1/completions field (not chat)");
  request.stream = bool_field(body, "stream", false);
  if (const RequestJson* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("'stream_options' must be an object", ErrorCode::InvalidType);
    request.include_usage = bool_field(*options, "include_usage", false);
  }

  if (endpoint == Endpoint::Completions) {
    request.prompts = prompts_field(body);
    const int64_t logprobs = int_field(body, "logprobs", -1, 0, 20);
    request.logprobs = logprobs >= 0;
    request.params.top_logprobs = static_cast<int32_t>(logprobs);
    if (request.echo && request.logprobs)
      bad("'echo' with 'logprobs' is not supported: the prompt's tokens get no log probabilities here",
          ErrorCode::Unsupported);
  } else {
    parse_chat_fields(body, request);
    request.logprobs = bool_field(body, "logprobs", false);
    const int64_t top = int_field(body, "top_logprobs", 0, 0, 20);
    request.params.top_logprobs = request.logprobs ? static_cast<int32_t>(top) : -1;
  }

  GenerationParams& p = request.params;
  const char* max_name = field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  p.max_tokens = int_field(body, max_name, default_max_tokens, INT64_MIN, INT64_MAX);
  if (p.max_tokens < 1) bad(fmt::format("'{}' must be at least 1", max_name));
  p.max_tokens = max_tokens_with_n_predict(body, max_name, p.max_tokens);
  p.stop = stop_field(body);

  // OpenAI's defaults, not the CLI's: no top-k, top-p or min-p unless asked for.
  SamplingParams& s = p.sampling;
  s.temperature = static_cast<float>(number_field(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(number_field(body, "top_p", 1.0, 0.0, 1.0));
  s.top_k = static_cast<int32_t>(int_field(body, "top_k", 0, -1, 1 << 30));
  s.min_p = static_cast<float>(number_field(body, "min_p", 0.0, 0.0, 1.0));
  s.presence_penalty = static_cast<float>(number_field(body, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(number_field(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repeat_last_n = -1;  // OpenAI's penalties look at everything so far
  const RequestJson* seed = field(body, "seed");
  if (seed && !seed->is_number_integer()) bad("'seed' must be an integer", ErrorCode::InvalidType);
  s.seed = seed ? seed->get<uint64_t>() : std::random_device{}();
  p.speculation = speculation_field(body, default_speculation);
  s.logit_bias = logit_bias_field(body);
  p.ignore_eos = bool_field(body, "ignore_eos", false);
  p.stop_token_ids = stop_token_ids_field(body);
  p.min_tokens = int_field(body, "min_tokens", 0, 0, p.max_tokens);
  parse_sampling_extras(body, request);
  p.grammar = output_grammar(body, request);
  return request;
}

}  // namespace

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::None: return {};
    case ErrorCode::InvalidValue: return "invalid_value";
    case ErrorCode::InvalidType: return "invalid_type";
    case ErrorCode::MissingRequired: return "missing_required_parameter";
    case ErrorCode::Unsupported: return "unsupported_parameter";
    case ErrorCode::ContextLengthExceeded: return "context_length_exceeded";
    case ErrorCode::ModelNotFound: return "model_not_found";
  }
  return {};
}

json error_json(std::string_view message, std::string_view type, std::string_view param, ErrorCode code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code == ErrorCode::None ? json(nullptr) : json(error_code_name(code))}}}};
}

json stream_error_json(const RequestEvent& event) {
  return error_json(event.error, event.error_from_request ? "invalid_request_error" : "server_error");
}

std::string dump_json(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

void note_totals(Completion& completion, const RequestEvent& event) {
  completion.prompt_tokens = event.prompt_tokens;
  completion.completion_tokens = event.completion_tokens;
  completion.cached_tokens = event.cached_tokens;
  completion.drafted_tokens = event.drafted_tokens;
  completion.accepted_tokens = event.accepted_tokens;
  completion.stop_string = event.stop_string;
  completion.prefill_ms = event.prefill_ms;
  completion.decode_ms = event.decode_ms;
}

json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens, int64_t drafted_tokens,
                int64_t accepted_tokens) {
  json usage = {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", prompt_tokens + completion_tokens},
                {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
  if (drafted_tokens > 0) usage["speculative"] = {{"drafted", drafted_tokens}, {"accepted", accepted_tokens}};
  return usage;
}

namespace {

json bytes_of(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(c);
  return bytes;
}

// A logprob's token as the client sees it: its text, or with return_tokens_as_token_ids
// "token_id:N" (vLLM's form, for tokens whose bytes are not valid UTF-8 on their own).
std::string token_name(const TopLogprob& t, bool tokens_as_ids) {
  return tokens_as_ids ? fmt::format("token_id:{}", t.token) : t.text;
}

json logprobs_json(Endpoint endpoint, const std::vector<TokenLogprob>& logprobs, bool tokens_as_ids) {
  if (endpoint == Endpoint::Chat) {
    json content = json::array();
    for (const TokenLogprob& lp : logprobs) {
      json top = json::array();
      for (const TopLogprob& t : lp.top) {
        const std::string name = token_name(t, tokens_as_ids);
        top.push_back({{"token", name}, {"logprob", t.logprob}, {"bytes", bytes_of(name)}});
      }
      const std::string name = token_name(lp.chosen, tokens_as_ids);
      content.push_back(
          {{"token", name}, {"logprob", lp.chosen.logprob}, {"bytes", bytes_of(name)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  // The legacy completions shape: parallel arrays.
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  int64_t offset = 0;
  for (const TokenLogprob& lp : logprobs) {
    tokens.push_back(token_name(lp.chosen, tokens_as_ids));
    token_logprobs.push_back(lp.chosen.logprob);
    json top = json::object();
    for (const TopLogprob& t : lp.top) top[token_name(t, tokens_as_ids)] = t.logprob;
    top_logprobs.push_back(top);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(lp.chosen.text.size());
  }
  return {
      {"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

json choice_logprobs(const ResponseMeta& meta, const std::vector<TokenLogprob>& logprobs) {
  return meta.logprobs ? logprobs_json(meta.endpoint, logprobs, meta.tokens_as_ids) : json(nullptr);
}

// finish_reason for the final chunk or choice: "tool_calls" replaces "stop" when calls were made.
std::string finish_reason_text(FinishReason reason, bool called_tools) {
  const bool stopped = reason == FinishReason::EndOfSequence || reason == FinishReason::StopString;
  return called_tools && stopped ? "tool_calls" : finish_reason_name(reason);
}

json chunk_base(const ResponseMeta& meta) {
  const bool chat = meta.endpoint == Endpoint::Chat;
  return {{"id", meta.id},
          {"object", chat ? "chat.completion.chunk" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model}};
}

}  // namespace

namespace {

json choice_json(const ResponseMeta& meta, const Completion& c, int32_t index) {
  const bool chat = meta.endpoint == Endpoint::Chat;
  const bool called_tools = c.reply && !c.reply->tool_calls.empty();
  json choice = {{"index", index},
                 {"logprobs", choice_logprobs(meta, c.logprobs)},
                 {"finish_reason", finish_reason_text(c.finish_reason, called_tools)}};
  if (chat && c.reply) {
    json message = {{"role", "assistant"}};
    message["content"] = called_tools && c.reply->content.empty() ? json(nullptr) : json(c.reply->content);
    if (!c.reply->reasoning_content.empty()) message["reasoning_content"] = c.reply->reasoning_content;
    if (called_tools) {
      json calls = json::array();
      for (const chat::ToolCall& call : c.reply->tool_calls)
        calls.push_back({{"id", call.id},
                         {"type", "function"},
                         {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      message["tool_calls"] = std::move(calls);
    }
    choice["message"] = std::move(message);
  } else if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
  } else {
    choice["text"] = c.text;
  }
  return choice;
}

}  // namespace

json choices_usage(const ResponseMeta& meta, const std::vector<Completion>& completions) {
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0, drafted = 0, accepted = 0;
  const size_t n = static_cast<size_t>(std::max(meta.n, 1));
  for (size_t i = 0; i < completions.size(); ++i) {
    const Completion& c = completions[i];
    if (i % n == 0) {  // a prompt's first choice: the prompt, once
      prompt_tokens += c.prompt_tokens;
      cached_tokens += c.cached_tokens;
    }
    completion_tokens += c.completion_tokens;
    drafted += c.drafted_tokens;
    accepted += c.accepted_tokens;
  }
  return usage_json(prompt_tokens, completion_tokens, cached_tokens, drafted, accepted);
}

json response_json(const ResponseMeta& meta, const std::vector<Completion>& completions) {
  const bool chat = meta.endpoint == Endpoint::Chat;
  json choices = json::array();
  for (size_t i = 0; i < completions.size(); ++i)
    choices.push_back(choice_json(meta, completions[i], static_cast<int32_t>(i)));
  return {{"id", meta.id},
          {"object", chat ? "chat.completion" : "text_completion"},
          {"created", meta.created},
          {"model", meta.model},
          {"choices", std::move(choices)},
          {"usage", choices_usage(meta, completions)}};
}

std::string sse_data(const json& value) { return "data: " + dump_json(value) + "\n\n"; }

namespace {

std::string sse_chunks(const ResponseMeta& meta, const RequestEvent& event, const std::vector<json>& deltas, bool first,
                       bool called_tools, int32_t index) {
  const bool chat = meta.endpoint == Endpoint::Chat;
  std::string out;
  const auto chunk_of = [&](json delta, const json& logprobs) {
    json chunk = chunk_base(meta);
    json choice = {{"index", index}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
    if (chat) {
      choice["delta"] = std::move(delta);
    } else {
      choice["text"] = delta["content"];
    }
    chunk["choices"] = json::array({choice});
    return sse_data(chunk);
  };
  // Chat streams open with the assistant role, as OpenAI's do.
  if (first && chat) out += chunk_of({{"role", "assistant"}, {"content", ""}}, nullptr);
  const bool with_logprobs = meta.logprobs && !event.logprobs.empty();
  for (size_t i = 0; i < deltas.size(); ++i)
    out += chunk_of(deltas[i], i == 0 && with_logprobs ? choice_logprobs(meta, event.logprobs) : json(nullptr));
  if (deltas.empty() && with_logprobs) out += chunk_of({{"content", ""}}, choice_logprobs(meta, event.logprobs));
  if (!event.finished) return out;

  json finish = chunk_base(meta);
  json choice = {{"index", index},
                 {"logprobs", nullptr},
                 {"finish_reason", finish_reason_text(event.finish_reason, called_tools)}};
  if (chat) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  finish["choices"] = json::array({choice});
  out += sse_data(finish);
  return out;
}

// A one-choice stream's end, after its final event.
std::string single_choice_end(const ResponseMeta& meta, const RequestEvent& event, bool include_usage) {
  if (!event.finished) return {};
  return sse_stream_end(meta, include_usage
                                  ? usage_json(event.prompt_tokens, event.completion_tokens, event.cached_tokens,
                                               event.drafted_tokens, event.accepted_tokens)
                                  : json(nullptr));
}

}  // namespace

std::string sse_event(const ResponseMeta& meta, const RequestEvent& event, bool first, bool include_usage) {
  std::vector<json> deltas;
  if (!event.text.empty()) deltas.push_back({{"content", event.text}});
  return sse_chunks(meta, event, deltas, first, false, 0) + single_choice_end(meta, event, include_usage);
}

std::string sse_chat_event(const ResponseMeta& meta, const RequestEvent& event, const std::vector<json>& deltas,
                           bool first, bool include_usage, bool called_tools) {
  return sse_chunks(meta, event, deltas, first, called_tools, 0) + single_choice_end(meta, event, include_usage);
}

std::string sse_choice_event(const ResponseMeta& meta, const RequestEvent& event, const std::vector<json>& deltas,
                             bool first, bool called_tools, int32_t index) {
  return sse_chunks(meta, event, deltas, first, called_tools, index);
}

std::string sse_stream_end(const ResponseMeta& meta, const json& usage) {
  std::string out;
  if (!usage.is_null()) {
    json chunk = chunk_base(meta);
    chunk["choices"] = json::array();
    chunk["usage"] = usage;
    out += sse_data(chunk);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace tandem::server
