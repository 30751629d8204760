// /tokenize, /detokenize and /apply-template bodies (see tokenize_api.h). Types are checked
// as strictly as the OpenAI endpoints check theirs; unknown fields are ignored.
#include "server/tokenize_api.h"

#include <iterator>
#include <unordered_map>

#include "base/error.h"
#include "server/chat_request.h"
#include "server/json_body.h"
#include "server/request_json.h"
#include "tokenizer/utf8.h"

namespace tandem::server {

using nlohmann::json;

namespace {

// What llama-server shows for one token: its text, or its bytes when they are not whole
// UTF-8. Control tokens have no bytes in decoded text; their piece ("<|im_start|>") is shown.
json piece_json(const Tokenizer& tokenizer, int32_t id) {
  std::string bytes = tokenizer.token_bytes(id);
  if (bytes.empty() && tokenizer.vocab().types[id] == TokenType::Control) bytes = tokenizer.vocab().pieces[id];
  if (sanitize_utf8(bytes) == bytes) return bytes;
  json values = json::array();
  for (const char c : bytes) values.push_back(static_cast<unsigned char>(c));
  return values;
}

// vLLM's /tokenize (tokenize_api.h): a prompt, or chat messages rendered as the chat endpoint
// renders them.
std::string vllm_tokenize(const RequestJson& body, const Tokenizer& tokenizer, const VllmTokenizeContext& vllm,
                          const EncodeCheckpoint& checkpoint) {
  std::vector<int32_t> ids;
  if (field(body, "messages") != nullptr) {
    if (vllm.renderer == nullptr) bad("'messages' cannot be tokenized here: this server has no chat template");
    ApiRequest request;
    request.endpoint = Endpoint::Chat;
    try {
      parse_chat_fields(body, request);
      chat::RenderOptions options = request.render;
      options.template_kwargs = merge_template_kwargs(vllm.default_template_kwargs, options.template_kwargs);
      // The ids the chat endpoint feeds the model for these messages: control tokens matched in
      // the template's text only, BOS added unless the template wrote it (vLLM's templates
      // write it, hence its add_special_tokens = false default; false here adds none).
      const RenderedChat rendered =
          vllm.renderer->render_for_tokenizer(request.messages, request.tools, tokenizer, options);
      const bool bos = bool_field(body, "add_special_tokens", true) && tokenizer.vocab().add_bos &&
                       !vllm.renderer->starts_with_bos(rendered.text);
      checkpoint();
      ids = tokenizer.encode(rendered.text, bos, rendered.special_spans, checkpoint);
    } catch (const InputError& e) {
      bad(e.what());
    }
  } else {
    const RequestJson* prompt = field(body, "prompt");
    if (!prompt->is_string())
      bad(fmt::format("'prompt' must be a string, not {}", shown(*prompt)), ErrorCode::InvalidType);
    // vLLM's default: special tokens (BOS) added to a prompt.
    const bool bos = bool_field(body, "add_special_tokens", true) && tokenizer.vocab().add_bos;
    checkpoint();
    ids = tokenizer.encode(prompt->get_ref<const std::string&>(), bos, false, checkpoint);
  }
  json answer = {{"count", ids.size()}, {"max_model_len", vllm.max_model_len}, {"tokens", ids}};
  if (bool_field(body, "return_token_strs", false)) {
    json pieces = json::array();
    for (const int32_t id : ids) pieces.push_back(tokenizer.vocab().pieces[static_cast<size_t>(id)]);
    answer["token_strs"] = std::move(pieces);
  } else {
    answer["token_strs"] = nullptr;
  }
  return answer.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string tokenize_response(std::string_view body_text, const Tokenizer& tokenizer,
                              const std::function<bool()>& abandoned, const VllmTokenizeContext& vllm) {
  // Megabytes of text take seconds: the client leaving, or the server stopping, ends the
  // work between the parts the encoder splits and merges (each bounded, text_encoder.h), and
  // every kCheckpointIds ids of the answer as it is written.
  const EncodeCheckpoint checkpoint = [&abandoned] {
    if (abandoned && abandoned()) throw BodyAbandoned();
  };
  constexpr size_t kCheckpointIds = size_t{1} << 16;
  std::vector<int32_t> ids;
  {  // the body (the text twice: as sent, and parsed) is not needed past the encoding
    const RequestJson body = parse_json_object(body_text, {}, abandoned);
    const RequestJson* content = field(body, "content");
    if (!content && (field(body, "prompt") != nullptr || field(body, "messages") != nullptr))
      return vllm_tokenize(body, tokenizer, vllm, checkpoint);
    if (!content)
      bad("'content' is required (the text to tokenize; or vLLM's 'prompt' or 'messages')", ErrorCode::MissingRequired);
    if (!content->is_string())
      bad(fmt::format("'content' must be a string, not {}", shown(*content)), ErrorCode::InvalidType);
    const bool add_special = bool_field(body, "add_special", false);
    const bool parse_special = bool_field(body, "parse_special", false);
    checkpoint();
    ids = tokenizer.encode(content->get_ref<const std::string&>(), add_special && tokenizer.vocab().add_bos,
                           parse_special, checkpoint);
    if (!bool_field(body, "with_pieces", false)) {
      // Sized exactly first: an answer grown by doubling is held twice over while it grows.
      size_t size = 16;
      for (const int32_t id : ids) size += fmt::formatted_size("{},", id);
      std::string out;
      out.reserve(size);
      out = R"({"tokens":[)";
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i % kCheckpointIds == 0) checkpoint();
        fmt::format_to(std::back_inserter(out), "{}{}", i == 0 ? "" : ",", ids[i]);
      }
      out += "]}";
      return out;
    }
  }
  // Each distinct id's piece is written once (a vocabulary is far smaller than a long text's
  // ids), which also sizes the answer before it is written.
  std::unordered_map<int32_t, std::string> pieces;
  size_t size = 16;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % kCheckpointIds == 0) checkpoint();
    const int32_t id = ids[i];
    auto [it, fresh] = pieces.try_emplace(id);
    if (fresh) it->second = piece_json(tokenizer, id).dump();
    size += fmt::formatted_size(R"(,{{"id":{},"piece":}})", id) + it->second.size();
  }
  std::string out;
  out.reserve(size);
  out = R"({"tokens":[)";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i % kCheckpointIds == 0) checkpoint();
    fmt::format_to(std::back_inserter(out), R"({}{{"id":{},"piece":)", i == 0 ? "" : ",", ids[i]);
    out += pieces.at(ids[i]);
    out += '}';
  }
  out += "]}";
  return out;
}

json detokenize_json(std::string_view body_text, const Tokenizer& tokenizer, const std::function<bool()>& abandoned) {
  const RequestJson body = parse_json_object(body_text, {}, abandoned);
  const RequestJson* tokens = field(body, "tokens");
  if (!tokens) bad("'tokens' is required (an array of token ids)", ErrorCode::MissingRequired);
  if (!tokens->is_array())
    bad(fmt::format("'tokens' must be an array of token ids, not {}", shown(*tokens)), ErrorCode::InvalidType);
  const int64_t vocab_size = tokenizer.vocab().size();
  std::vector<int32_t> ids;
  std::vector<std::string> outside;  // as sent, for the message
  for (const RequestJson& id : *tokens) {
    if (!id.is_number_integer()) bad(fmt::format("'tokens' must hold integer token ids, not {}", shown(id)));
    const bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                                                  : id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab_size;
    if (!in_range) {
      outside.push_back(shown(id));
      continue;
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  if (!outside.empty()) {
    std::string listed;
    for (size_t k = 0; k < outside.size() && k < 8; ++k) listed += (k == 0 ? "" : ", ") + outside[k];
    if (outside.size() > 8) listed += fmt::format(" (and {} more)", outside.size() - 8);
    bad(fmt::format("'tokens' holds ids outside the vocabulary of {} tokens: {}", vocab_size, listed));
  }
  std::string text = tokenizer.decode(ids);
  return {{"content", text}, {"prompt", std::move(text)}};
}

json apply_template_json(std::string_view body_text, const chat::ChatRenderer& renderer,
                         const nlohmann::ordered_json& default_template_kwargs,
                         const std::function<bool()>& abandoned) {
  const RequestJson body = parse_json_object(body_text, {}, abandoned);
  ApiRequest request;
  request.endpoint = Endpoint::Chat;
  try {
    parse_chat_fields(body, request);
    chat::RenderOptions options = request.render;
    options.template_kwargs = merge_template_kwargs(default_template_kwargs, options.template_kwargs);
    return {{"prompt", renderer.render(request.messages, request.tools, options)}};
  } catch (const InputError& e) {  // a role the template refuses, or an error it raises
    bad(e.what());
  } catch (const nlohmann::json::exception& e) {  // a shape the checks missed is still the client's
    bad(fmt::format("the request does not have the expected shape: {}", e.what()));
  }
}

}  // namespace tandem::server
