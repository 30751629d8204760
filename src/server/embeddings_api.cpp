// /v1/embeddings bodies and responses (see embeddings_api.h).
#include "server/embeddings_api.h"

#include <cmath>
#include <cstring>

#include "server/json_body.h"
#include "server/request_json.h"

namespace tandem::server {

using nlohmann::json;

namespace {

std::vector<int32_t> ids_of(const RequestJson& array, int64_t vocab_size, const std::string& where) {
  std::vector<int32_t> ids;
  for (const RequestJson& id : array) {
    if (!id.is_number_integer()) bad(fmt::format("'{}' must hold integer token ids, not {}", where, shown(id)));
    const bool in_range = id.is_number_unsigned() ? id.get<uint64_t>() < static_cast<uint64_t>(vocab_size)
                                                  : id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab_size;
    if (!in_range)
      bad(fmt::format("'{}': token id {} is outside the vocabulary (0..{})", where, shown(id), vocab_size - 1));
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

std::string base64_of(const std::vector<float>& values) {
  static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());  // x86 and ARM: little-endian, as the format says
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t triple = 0;
    for (size_t k = 0; k < 3; ++k) triple = (triple << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(triple >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

}  // namespace

EmbeddingsRequest parse_embeddings_request(std::string_view body_text, const Tokenizer& tokenizer, int64_t d_model,
                                           int64_t context_length, int64_t max_inputs,
                                           std::string_view max_inputs_reason, const std::function<bool()>& abandoned) {
  const RequestJson body = parse_json_object(body_text, {}, abandoned);
  EmbeddingsRequest request;
  if (const RequestJson* model = field(body, "model")) {
    if (!model->is_string())
      bad(fmt::format("'model' must be a string, not {}", shown(*model)), ErrorCode::InvalidType);
    request.model = model->get<std::string>();
  }
  if (const RequestJson* format = field(body, "encoding_format")) {
    if (*format != "float" && *format != "base64")
      bad(fmt::format("'encoding_format' must be \"float\" or \"base64\", not {}", shown(*format)));
    request.base64 = *format == "base64";
  }
  if (const RequestJson* dimensions = field(body, "dimensions")) {
    if (!dimensions->is_number_integer() || dimensions->get<int64_t>() != d_model)
      bad(fmt::format("'dimensions' can only be this model's width, {} (got {})", d_model, shown(*dimensions)));
  }
  const RequestJson* input = field(body, "input");
  if (!input) bad("'input' is required (a string, an array of strings, or token ids)", ErrorCode::MissingRequired);
  // Counted before anything is tokenized: a request with too many inputs costs nothing.
  const bool many = input->is_array() && !input->empty() && !input->front().is_number();
  if (many && static_cast<int64_t>(input->size()) > max_inputs)
    bad(fmt::format("'input' has {} items; at most {} per request{}", input->size(), max_inputs, max_inputs_reason));
  if (abandoned && abandoned()) throw BodyAbandoned();
  const int64_t vocab_size = tokenizer.vocab().size();
  const bool bos = tokenizer.vocab().add_bos;
  // An empty text would embed BOS alone (or nothing): refused, as OpenAI refuses it. A text
  // with more bytes than the context's tokens could ever cover is refused unread.
  const auto text_ids = [&](const RequestJson& text, const std::string& where) {
    const std::string& value = text.get_ref<const std::string&>();
    if (value.empty()) bad(fmt::format("'{}' is an empty string", where));
    if (const int64_t at_least = tokenizer.min_tokens_of(value.size()); at_least > context_length)
      bad(fmt::format("'{}' has {} bytes, at least {} tokens, but the context is {} tokens", where, value.size(),
                      at_least, context_length));
    return tokenizer.encode(value, bos);
  };
  if (input->is_string()) {
    request.inputs.push_back(text_ids(*input, "input"));
  } else if (input->is_array() && !input->empty() && input->front().is_number()) {
    request.inputs.push_back(ids_of(*input, vocab_size, "input"));
  } else if (input->is_array() && !input->empty()) {
    for (size_t i = 0; i < input->size(); ++i) {
      const RequestJson& item = (*input)[i];
      const std::string where = fmt::format("input[{}]", i);
      if (item.is_string())
        request.inputs.push_back(text_ids(item, where));
      else if (item.is_array())
        request.inputs.push_back(ids_of(item, vocab_size, where));
      else
        bad(fmt::format("'{}' must be a string or an array of token ids, not {}", where, shown(item)),
            ErrorCode::InvalidType);
    }
  } else {
    bad(fmt::format("'input' must be a non-empty string, array of strings, or token ids, not {}", shown(*input)));
  }
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    const auto n = static_cast<int64_t>(request.inputs[i].size());
    if (n == 0) bad(fmt::format("'input': input {} is empty", i));
    if (n > context_length)
      bad(fmt::format("'input': input {} has {} tokens but the context is {} tokens", i, n, context_length),
          ErrorCode::ContextLengthExceeded);
  }
  return request;
}

void normalize_l2(std::vector<float>& vector) {
  double sum_sq = 0.0;
  for (const float x : vector) sum_sq += static_cast<double>(x) * x;
  if (sum_sq == 0.0) return;
  const double inv = 1.0 / std::sqrt(sum_sq);
  for (float& x : vector) x = static_cast<float>(x * inv);
}

json embeddings_response_json(const std::vector<std::vector<float>>& vectors, bool base64, const std::string& model,
                              int64_t prompt_tokens) {
  json data = json::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    if (base64)
      item["embedding"] = base64_of(vectors[i]);
    else
      item["embedding"] = vectors[i];
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace tandem::server
