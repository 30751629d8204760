// llama-server's native bodies and responses (see llama_server_api.h).
#include "server/llama_server_api.h"

#include <algorithm>
#include <cmath>

#include "server/json_body.h"
#include "server/request_json.h"

namespace tandem::server {

using nlohmann::json;

namespace {

// A prompt's strings: more bytes than the context's tokens could cover is refused unread.
void check_text_bytes(const Tokenizer& tokenizer, size_t bytes, int64_t context_length, const std::string& where) {
  if (const int64_t at_least = tokenizer.min_tokens_of(bytes); at_least > context_length)
    throw ApiError(400, "invalid_request_error",
                   fmt::format("'{}' has {} bytes of text, so at least {} tokens, but the context is {} tokens", where,
                               bytes, at_least, context_length),
                   where, ErrorCode::ContextLengthExceeded);
}

int32_t prompt_token_id(const RequestJson& id, const std::string& where) {
  const bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() <= INT32_MAX
                                                : id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX;
  if (!id.is_number_integer() || !in_range)
    bad(fmt::format("'{}' token ids must be integers from 0, not {}", where, shown(id)));
  return static_cast<int32_t>(id.get<int64_t>());
}

// One prompt: a string (tokenized by the generation path), or an array of token ids and strings
// (tokenized here; BOS before a leading string, as llama-server adds it). Control tokens written
// in the text are matched whole, as llama-server's /completion parses them.
PromptInput one_prompt(const RequestJson& item, const Tokenizer& tokenizer, int64_t context_length,
                       const std::string& where) {
  if (item.is_string()) return {.text = item.get<std::string>(), .ids = {}, .parse_special = true};
  if (!item.is_array() || item.empty())
    bad(fmt::format("'{}' must be a string or a non-empty array of token ids and strings, not {}", where, shown(item)),
        ErrorCode::InvalidType);
  size_t bytes = 0;
  for (const RequestJson& part : item) {
    if (part.is_string()) {
      bytes += part.get_ref<const std::string&>().size();
    } else if (!part.is_number_integer()) {
      bad(fmt::format("'{}' may hold token ids and strings, not {}", where, shown(part)), ErrorCode::InvalidType);
    }
  }
  check_text_bytes(tokenizer, bytes, context_length, where);
  PromptInput prompt;
  const bool bos = tokenizer.vocab().add_bos && tokenizer.vocab().bos_id >= 0 && item.front().is_string();
  if (bos) prompt.ids.push_back(tokenizer.vocab().bos_id);
  for (const RequestJson& part : item) {
    if (part.is_string()) {
      const std::vector<int32_t> ids =
          tokenizer.encode(part.get_ref<const std::string&>(), false, /*parse_special=*/true);
      prompt.ids.insert(prompt.ids.end(), ids.begin(), ids.end());
    } else {
      prompt.ids.push_back(prompt_token_id(part, where));
    }
  }
  if (prompt.ids.empty()) bad(fmt::format("'{}' is empty", where));
  return prompt;
}

// /completion's prompt: one prompt (a string, or an array holding a token id), or several.
std::vector<PromptInput> native_prompts(const RequestJson& body, const Tokenizer& tokenizer, int64_t context_length) {
  const RequestJson* prompt = field(body, "prompt");
  if (!prompt) bad("'prompt' is required", ErrorCode::MissingRequired);
  if (prompt->is_string()) return {one_prompt(*prompt, tokenizer, context_length, "prompt")};
  if (!prompt->is_array() || prompt->empty())
    bad(fmt::format("'prompt' must be a string, an array of token ids and strings, or an array of those, not {}",
                    shown(*prompt)),
        ErrorCode::InvalidType);
  const bool single = std::any_of(prompt->begin(), prompt->end(), [](const RequestJson& p) { return p.is_number(); });
  if (single) return {one_prompt(*prompt, tokenizer, context_length, "prompt")};
  if (prompt->size() > static_cast<size_t>(kMaxPrompts))
    bad(fmt::format("'prompt' holds {} prompts; at most {} per request", prompt->size(), kMaxPrompts));
  std::vector<PromptInput> prompts;
  for (size_t i = 0; i < prompt->size(); ++i)
    prompts.push_back(one_prompt((*prompt)[i], tokenizer, context_length, fmt::format("prompt[{}]", i)));
  return prompts;
}

// llama-server's logit_bias [[id, bias], [id, false], ...] as OpenAI's object (false: -100, the
// strongest ban the object form has). Strings as tokens are refused.
void logit_bias_as_object(RequestJson& body) {
  const auto it = body.find("logit_bias");
  if (it == body.end() || !it->is_array()) return;
  RequestJson object = RequestJson::object();
  for (const RequestJson& pair : *it) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer())
      bad(fmt::format("'logit_bias' entries must be [token id, bias or false], not {} (text as a token is not "
                      "supported: send its ids)",
                      shown(pair)));
    const RequestJson& bias = pair[1];
    if (!bias.is_number() && !(bias.is_boolean() && !bias.get<bool>()))
      bad(fmt::format("'logit_bias' biases must be numbers or false, not {}", shown(bias)));
    object[pair[0].dump()] = bias.is_boolean() ? RequestJson(-100) : bias;
  }
  *it = std::move(object);
}

}  // namespace

json generation_settings_json(const ApiRequest& api, int32_t n_probs, int64_t context_length, int64_t max_tokens_sent) {
  const GenerationParams& p = api.params;
  const SamplingParams& s = p.sampling;
  json breakers = json::array();
  for (const std::string& b : api.dry_breakers) breakers.push_back(b);
  return {{"n_ctx", context_length},
          {"n_predict", max_tokens_sent},
          {"seed", s.seed},
          {"temperature", s.temperature},
          {"dynatemp_range", 0.0},
          {"dynatemp_exponent", 1.0},
          {"top_k", s.top_k},
          {"top_p", s.top_p},
          {"min_p", s.min_p},
          {"typical_p", s.typical_p},
          {"xtc_probability", s.xtc_probability},
          {"xtc_threshold", s.xtc_threshold},
          {"repeat_last_n", s.repeat_last_n},
          {"repeat_penalty", s.repetition_penalty},
          {"presence_penalty", s.presence_penalty},
          {"frequency_penalty", s.frequency_penalty},
          {"dry_multiplier", s.dry.multiplier},
          {"dry_base", s.dry.base},
          {"dry_allowed_length", s.dry.allowed_length},
          {"dry_penalty_last_n", s.dry.penalty_last_n},
          {"dry_sequence_breakers", std::move(breakers)},
          {"mirostat", s.mirostat},
          {"mirostat_tau", s.mirostat_tau},
          {"mirostat_eta", s.mirostat_eta},
          {"stop", p.stop},
          {"max_tokens", max_tokens_sent},
          {"n_keep", 0},
          {"n_discard", 0},
          {"ignore_eos", p.ignore_eos},
          {"stream", api.stream},
          {"n_probs", n_probs},
          {"min_keep", 0},
          {"grammar", p.grammar ? "(compiled)" : ""},
          {"samplers", {"penalties", "dry", "temperature", "top_k", "typ_p", "top_p", "min_p", "xtc"}},
          {"speculative.n_max", p.speculation.draft_max},
          {"speculative.n_min", p.speculation.draft_min},
          {"timings_per_token", false},
          {"post_sampling_probs", false},
          {"lora", json::array()}};
}

namespace {

// What /completion and /infill share once the prompts are known: llama-server's names and
// defaults rewritten into a /v1/completions body, which parse_request reads.
NativeCompletionRequest finish_native(RequestJson body, std::vector<PromptInput> prompts, const Tokenizer& tokenizer,
                                      int64_t context_length, const SpeculationParams& speculation) {
  NativeCompletionRequest request;
  request.n_probs = static_cast<int32_t>(int_field(body, "n_probs", 0, 0, 20));
  request.return_tokens = bool_field(body, "return_tokens", false);
  if (field(body, "logprobs"))
    bad("'logprobs' is a /v1/completions field; llama-server's /completion takes 'n_probs'", ErrorCode::Unsupported);
  body.erase("n_probs");
  body.erase("return_tokens");
  if (request.n_probs > 0) body["logprobs"] = request.n_probs;
  if (const RequestJson* n_cmpl = field(body, "n_cmpl")) {
    if (field(body, "n")) bad("'n_cmpl' and 'n' are the same count: send one");
    body["n"] = *n_cmpl;
    body.erase("n_cmpl");
  }
  // -1 is llama-server's random seed.
  if (const RequestJson* seed = field(body, "seed"); seed && seed->is_number_integer() && *seed == -1)
    body.erase("seed");
  logit_bias_as_object(body);
  const int64_t n_predict = int_field(body, "n_predict", -1, -1, INT64_MAX);
  // llama-server's defaults, where OpenAI's differ; Mirostat replaces the truncations.
  const auto fallback = [&body](const char* name, RequestJson value) {
    if (!field(body, name)) body[name] = std::move(value);
  };
  fallback("temperature", 0.8);
  const RequestJson* mirostat = field(body, "mirostat");
  if (!mirostat || *mirostat == 0) {
    fallback("top_k", 40);
    fallback("top_p", 0.95);
    fallback("min_p", 0.05);
  }
  fallback("repeat_last_n", 64);
  body["prompt"] = "";  // the prompts are read above; parse_request wants the field
  request.api = parse_request(Endpoint::Completions, body.dump(), context_length, speculation);
  request.api.prompts = std::move(prompts);
  for (const PromptInput& prompt : request.api.prompts)
    request.prompt_texts.push_back(prompt.ids.empty() ? prompt.text : tokenizer.decode(prompt.ids));
  request.settings = generation_settings_json(request.api, request.n_probs, context_length, n_predict);
  return request;
}

std::string fim_missing(const FimTokens& fim) {
  std::string missing;
  const auto note = [&missing](int32_t id, const char* what) {
    if (id < 0) missing += (missing.empty() ? "" : ", ") + std::string(what);
  };
  note(fim.prefix, "prefix (tokenizer.ggml.fim_pre_token_id, <|fim_prefix|>)");
  note(fim.suffix, "suffix (tokenizer.ggml.fim_suf_token_id, <|fim_suffix|>)");
  note(fim.middle, "middle (tokenizer.ggml.fim_mid_token_id, <|fim_middle|>)");
  return missing;
}

}  // namespace

NativeCompletionRequest parse_native_completion(std::string_view body_text, const Tokenizer& tokenizer,
                                                int64_t context_length, const SpeculationParams& speculation,
                                                const std::function<bool()>& abandoned) {
  RequestJson body = parse_json_object(body_text, {}, abandoned);
  try {
    std::vector<PromptInput> prompts = native_prompts(body, tokenizer, context_length);
    return finish_native(std::move(body), std::move(prompts), tokenizer, context_length, speculation);
  } catch (const json::exception& e) {
    bad(std::string("the request does not have the expected shape: ") + e.what());
  }
}

FimTokens find_fim_tokens(const Tokenizer& tokenizer) {
  const Vocab& vocab = tokenizer.vocab();
  FimTokens fim{vocab.fim_pre_id, vocab.fim_suf_id, vocab.fim_mid_id, vocab.fim_rep_id, vocab.fim_sep_id};
  // The spellings of Qwen/StarCoder, CodeLlama, DeepSeek-Coder and CodeGemma vocabularies.
  struct Spelling {
    int32_t* id;
    std::vector<std::string_view> texts;
  };
  const std::vector<Spelling> spellings = {
      {&fim.prefix, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "▁<PRE>", "<｜fim▁begin｜>"}},
      {&fim.suffix, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "▁<SUF>", "<｜fim▁hole｜>"}},
      {&fim.middle, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "▁<MID>", "<｜fim▁end｜>"}},
      {&fim.repo, {"<|fim_repo|>", "<|repo_name|>", "<repo_name>", "<reponame>"}},
      {&fim.file_sep, {"<|file_sep|>", "<file_sep>", "<filename>"}},
  };
  for (const Spelling& spelling : spellings) {
    if (*spelling.id >= 0) continue;
    for (int64_t id = 0; id < vocab.size() && *spelling.id < 0; ++id) {
      const TokenType type = vocab.types.empty() ? TokenType::Normal : vocab.types[static_cast<size_t>(id)];
      if (type != TokenType::Control && type != TokenType::UserDefined) continue;
      const std::string& piece = vocab.pieces[static_cast<size_t>(id)];
      if (std::find(spelling.texts.begin(), spelling.texts.end(), piece) != spelling.texts.end())
        *spelling.id = static_cast<int32_t>(id);
    }
  }
  return fim;
}

std::vector<int32_t> infill_prompt(const Tokenizer& tokenizer, const FimTokens& fim, std::string_view prefix,
                                   std::string_view suffix,
                                   const std::vector<std::pair<std::string, std::string>>& extra,
                                   std::string_view prompt) {
  std::vector<int32_t> ids;
  const auto add = [&](std::string_view text) {
    if (text.empty()) return;
    const std::vector<int32_t> encoded = tokenizer.encode(text, false);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
  };
  const Vocab& vocab = tokenizer.vocab();
  if (vocab.add_bos && vocab.bos_id >= 0) ids.push_back(vocab.bos_id);
  if (fim.repo >= 0 && fim.file_sep >= 0) {
    // The repository-level layout (Qwen2.5-Coder): each extra chunk is a file of the project.
    ids.push_back(fim.repo);
    add("myproject\n");
    for (const auto& [filename, text] : extra) {
      ids.push_back(fim.file_sep);
      add(filename + "\n");
      add(text);
    }
    ids.push_back(fim.file_sep);
    add("filename\n");
  } else {
    for (const auto& [filename, text] : extra) add(text);
  }
  ids.push_back(fim.prefix);
  add(prefix);
  ids.push_back(fim.suffix);
  add(suffix);
  ids.push_back(fim.middle);
  add(prompt);
  return ids;
}

NativeCompletionRequest parse_infill(std::string_view body_text, const Tokenizer& tokenizer, int64_t context_length,
                                     const SpeculationParams& speculation, const std::function<bool()>& abandoned) {
  RequestJson body = parse_json_object(body_text, {}, abandoned);
  try {
    const std::string prefix = string_field(body, "input_prefix");
    const std::string suffix = string_field(body, "input_suffix");
    const std::string prompt = string_field(body, "prompt");
    std::vector<std::pair<std::string, std::string>> extra;
    size_t bytes = prefix.size() + suffix.size() + prompt.size();
    if (const RequestJson* chunks = field(body, "input_extra")) {
      if (!chunks->is_array())
        bad(fmt::format("'input_extra' must be an array of {{\"filename\", \"text\"}} objects, not {}", shown(*chunks)),
            ErrorCode::InvalidType);
      for (size_t i = 0; i < chunks->size(); ++i) {
        const RequestJson& chunk = (*chunks)[i];
        const std::string where = fmt::format("input_extra[{}]", i);
        if (!chunk.is_object())
          bad(fmt::format("'{}' must be a {{\"filename\", \"text\"}} object, not {}", where, shown(chunk)),
              ErrorCode::InvalidType);
        const RequestJson* filename = field(chunk, "filename");
        const RequestJson* text = field(chunk, "text");
        if ((filename && !filename->is_string()) || !text || !text->is_string())
          bad(fmt::format("'{}' needs a string 'text' and may have a string 'filename', not {}", where, shown(chunk)),
              ErrorCode::InvalidType);
        extra.emplace_back(filename ? filename->get<std::string>() : "", text->get<std::string>());
        bytes += extra.back().first.size() + extra.back().second.size();
      }
    }
    const FimTokens fim = find_fim_tokens(tokenizer);
    if (const std::string missing = fim_missing(fim); !missing.empty())
      throw ApiError(400, "invalid_request_error",
                     "this model cannot infill: its vocabulary has no fill-in-the-middle token for the " + missing);
    check_text_bytes(tokenizer, bytes, context_length, "input_prefix");
    std::vector<PromptInput> prompts = {
        {.text = {}, .ids = infill_prompt(tokenizer, fim, prefix, suffix, extra, prompt)}};
    for (const char* name : {"input_prefix", "input_suffix", "input_extra"}) body.erase(name);
    return finish_native(std::move(body), std::move(prompts), tokenizer, context_length, speculation);
  } catch (const json::exception& e) {
    bad(std::string("the request does not have the expected shape: ") + e.what());
  }
}

std::string_view native_stop_type(FinishReason reason) {
  switch (reason) {
    case FinishReason::EndOfSequence: return "eos";
    case FinishReason::StopString: return "word";
    case FinishReason::Length:
    case FinishReason::ContextLimit: return "limit";
    default: return "none";
  }
}

namespace {

json token_bytes_json(const std::string& text) {
  json bytes = json::array();
  for (const char c : text) bytes.push_back(static_cast<unsigned char>(c));
  return bytes;
}

json probability_json(const TopLogprob& p) {
  return {{"id", p.token}, {"token", p.text}, {"bytes", token_bytes_json(p.text)}, {"logprob", p.logprob}};
}

}  // namespace

json completion_probabilities_json(const std::vector<TokenLogprob>& logprobs) {
  json out = json::array();
  for (const TokenLogprob& lp : logprobs) {
    json item = probability_json(lp.chosen);
    json top = json::array();
    for (const TopLogprob& alternative : lp.top) top.push_back(probability_json(alternative));
    item["top_logprobs"] = std::move(top);
    out.push_back(std::move(item));
  }
  return out;
}

json native_result_json(const NativeCompletionRequest& request, const NativeResult& result, const std::string& model) {
  const std::string_view stop_type = native_stop_type(result.finish_reason);
  const int64_t evaluated = result.prompt_tokens - result.cached_tokens;
  const auto per_second = [](int64_t n, double ms) { return ms > 0.0 ? 1e3 * static_cast<double>(n) / ms : 0.0; };
  const auto per_token = [](int64_t n, double ms) { return n > 0 ? ms / static_cast<double>(n) : 0.0; };
  const json timings = {{"cache_n", result.cached_tokens},
                        {"prompt_n", evaluated},
                        {"prompt_ms", result.prefill_ms},
                        {"prompt_per_token_ms", per_token(evaluated, result.prefill_ms)},
                        {"prompt_per_second", per_second(evaluated, result.prefill_ms)},
                        {"predicted_n", result.completion_tokens},
                        {"predicted_ms", result.decode_ms},
                        {"predicted_per_token_ms", per_token(result.completion_tokens, result.decode_ms)},
                        {"predicted_per_second", per_second(result.completion_tokens, result.decode_ms)}};
  const size_t prompt_index = static_cast<size_t>(result.index / std::max(1, request.api.n));
  json out = {{"index", result.index},
              {"content", result.content},
              {"tokens", request.return_tokens ? json(result.tokens) : json::array()},
              {"id_slot", -1},
              {"stop", true},
              {"model", model},
              {"tokens_predicted", result.completion_tokens},
              {"tokens_evaluated", result.prompt_tokens},
              {"generation_settings", request.settings},
              {"prompt", prompt_index < request.prompt_texts.size() ? request.prompt_texts[prompt_index] : ""},
              {"has_new_line", result.content.find('\n') != std::string::npos},
              {"truncated", result.finish_reason == FinishReason::ContextLimit},
              {"stop_type", stop_type},
              {"stopped_eos", stop_type == "eos"},
              {"stopped_limit", stop_type == "limit"},
              {"stopped_word", stop_type == "word"},
              {"stopping_word", result.stop_string},
              {"tokens_cached", result.cached_tokens},
              {"timings", timings}};
  if (request.n_probs > 0) out["completion_probabilities"] = completion_probabilities_json(result.logprobs);
  return out;
}

json native_chunk_json(const NativeCompletionRequest& request, int32_t index, const RequestEvent& event,
                       int64_t tokens_predicted) {
  json out = {{"index", index},
              {"content", event.text},
              {"tokens", event.tokens},
              {"stop", false},
              {"id_slot", -1},
              {"tokens_predicted", tokens_predicted},
              {"tokens_evaluated", event.prompt_tokens}};
  if (request.n_probs > 0) out["completion_probabilities"] = completion_probabilities_json(event.logprobs);
  return out;
}

EmbeddingsRequest parse_native_embedding(std::string_view body_text, const Tokenizer& tokenizer, int64_t d_model,
                                         int64_t context_length, int64_t max_inputs, std::string_view max_inputs_reason,
                                         int32_t& normalize, const std::function<bool()>& abandoned) {
  RequestJson body = parse_json_object(body_text, {}, abandoned);
  normalize = static_cast<int32_t>(int_field(body, "embd_normalize", 2, -1, 1 << 20));
  body.erase("embd_normalize");
  if (field(body, "content")) {
    if (field(body, "input")) bad("'content' and 'input' are the same text: send one");
    body["input"] = std::move(body["content"]);
    body.erase("content");
  } else if (!field(body, "input")) {
    bad("'content' is required (a string, an array of strings, or token ids)", ErrorCode::MissingRequired);
  }
  return parse_embeddings_request(body.dump(), tokenizer, d_model, context_length, max_inputs, max_inputs_reason);
}

void normalize_embedding(std::vector<float>& vector, int32_t norm) {
  if (norm < 0) return;
  if (norm == 2) return normalize_l2(vector);  // exactly /v1/embeddings' vectors
  double sum = 0.0;
  for (const float x : vector) {
    const double a = std::fabs(static_cast<double>(x));
    if (norm == 0)
      sum = std::max(sum, a);
    else if (norm == 1)
      sum += a;
    else
      sum += std::pow(a, norm);
  }
  if (norm > 2) sum = std::pow(sum, 1.0 / norm);
  if (sum == 0.0) return;
  for (float& x : vector) x = static_cast<float>(x / sum);
}

json native_embedding_json(const std::vector<std::vector<float>>& vectors, int64_t row_length) {
  json out = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float>& v = vectors[i];
    const size_t n = row_length > 0 ? static_cast<size_t>(row_length) : std::max<size_t>(v.size(), 1);
    json rows = json::array();
    for (size_t at = 0; at < v.size(); at += n)
      rows.push_back(std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(at),
                                        v.begin() + static_cast<std::ptrdiff_t>(std::min(v.size(), at + n))));
    out.push_back({{"index", i}, {"embedding", std::move(rows)}});
  }
  return out;
}

RerankRequest parse_rerank(std::string_view body_text, const Tokenizer& tokenizer, int64_t context_length,
                           int64_t max_inputs, bool can_rank, const std::function<bool()>& abandoned) {
  const RequestJson body = parse_json_object(body_text, {}, abandoned);
  RerankRequest request;
  request.model = string_field(body, "model");
  const RequestJson* query = field(body, "query");
  if (!query) bad("'query' is required", ErrorCode::MissingRequired);
  if (!query->is_string()) bad(fmt::format("'query' must be a string, not {}", shown(*query)), ErrorCode::InvalidType);
  const RequestJson* documents = field(body, "documents");
  if (!documents) bad("'documents' is required", ErrorCode::MissingRequired);
  if (!documents->is_array() || documents->empty())
    bad(fmt::format("'documents' must be a non-empty array of strings, not {}", shown(*documents)),
        ErrorCode::InvalidType);
  if (static_cast<int64_t>(documents->size()) > max_inputs)
    bad(fmt::format("'documents' has {} items; at most {} per request (each runs as one sequence)", documents->size(),
                    max_inputs));
  for (size_t i = 0; i < documents->size(); ++i) {
    if (!(*documents)[i].is_string())
      bad(fmt::format("'documents[{}]' must be a string, not {}", i, shown((*documents)[i])), ErrorCode::InvalidType);
    request.documents.push_back((*documents)[i].get<std::string>());
  }
  request.top_n = int_field(body, "top_n", 0, 1, INT64_MAX);
  request.return_documents = bool_field(body, "return_documents", false);
  if (!can_rank)
    throw ApiError(400, "invalid_request_error",
                   "this model cannot rank: reranking needs a classification head (cls.output.weight in the GGUF, "
                   "llama-server's --pooling rank), and this model has none");
  const Vocab& vocab = tokenizer.vocab();
  const std::vector<int32_t> query_ids = tokenizer.encode(query->get_ref<const std::string&>(), false);
  for (size_t i = 0; i < request.documents.size(); ++i) {
    const std::string where = fmt::format("documents[{}]", i);
    check_text_bytes(tokenizer, query->get_ref<const std::string&>().size() + request.documents[i].size(),
                     context_length, where);
    std::vector<int32_t>& ids = request.inputs.emplace_back();
    if (vocab.add_bos && vocab.bos_id >= 0) ids.push_back(vocab.bos_id);
    ids.insert(ids.end(), query_ids.begin(), query_ids.end());
    if (vocab.eos_id >= 0) ids.push_back(vocab.eos_id);
    const std::vector<int32_t> document = tokenizer.encode(request.documents[i], false);
    ids.insert(ids.end(), document.begin(), document.end());
    if (vocab.eos_id >= 0) ids.push_back(vocab.eos_id);
    if (static_cast<int64_t>(ids.size()) > context_length)
      throw ApiError(400, "invalid_request_error",
                     fmt::format("'{}' with the query is {} tokens, but the context is {} tokens", where, ids.size(),
                                 context_length),
                     where, ErrorCode::ContextLengthExceeded);
  }
  return request;
}

json rerank_response_json(const RerankRequest& request, const std::vector<float>& scores, const std::string& model,
                          int64_t prompt_tokens) {
  std::vector<size_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  const size_t n = request.top_n > 0 ? std::min(order.size(), static_cast<size_t>(request.top_n)) : order.size();
  json results = json::array();
  for (size_t k = 0; k < n; ++k) {
    json item = {{"index", order[k]}, {"relevance_score", scores[order[k]]}};
    if (request.return_documents) item["document"] = {{"text", request.documents[order[k]]}};
    results.push_back(std::move(item));
  }
  return {{"model", model},
          {"object", "list"},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}},
          {"results", std::move(results)}};
}

}  // namespace tandem::server
