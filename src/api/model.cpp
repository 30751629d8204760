// tandem::api::Model (include/tandem/tandem.h): load = weights + tokenizer + chat renderer,
// checked against each other once; afterwards only const reads, from any thread.
#include "api/error_translation.h"
#include "api/model_state.h"
#include "chat/model_chat_renderer.h"
#include "kv/kv_cache.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem::api {

namespace detail {

std::vector<chat::ChatMessage> to_internal(const std::vector<ChatMessage>& messages) {
  std::vector<chat::ChatMessage> internal(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    internal[i].role = messages[i].role;
    internal[i].content = messages[i].content;
  }
  return internal;
}

}  // namespace detail

Model::Model(std::unique_ptr<detail::ModelState> state) : state_(std::move(state)) {}
Model::~Model() = default;

std::shared_ptr<const Model> Model::load(const std::string& path, const ModelOptions& options) {
  return detail::translating_errors([&] {
    std::shared_ptr<const tandem::Model> model = load_model(path);
    Tokenizer tokenizer = load_tokenizer(path, options.tokenizer_path, model->config.vocab_size);
    TANDEM_CHECK_INPUT(tokenizer.vocab().size() == model->config.vocab_size,
                       "the tokenizer has {} tokens but the model's vocabulary is {}", tokenizer.vocab().size(),
                       model->config.vocab_size);
    chat::ChatRenderer chat_renderer = chat::model_chat_renderer(path, tokenizer, options.chat_template);
    auto state = std::unique_ptr<detail::ModelState>(
        new detail::ModelState{std::move(model), std::move(tokenizer), std::move(chat_renderer), path});
    return std::shared_ptr<const Model>(new Model(std::move(state)));
  });
}

std::vector<int32_t> Model::tokenize(std::string_view text, bool add_bos, bool parse_special) const {
  return detail::translating_errors(
      [&] { return state_->tokenizer.encode(text, add_bos && state_->tokenizer.vocab().add_bos, parse_special); });
}

std::string Model::detokenize(const std::vector<int32_t>& ids) const {
  return detail::translating_errors([&] { return state_->tokenizer.decode(ids); });
}

std::string Model::render_chat(const std::vector<ChatMessage>& messages) const {
  return detail::translating_errors([&] { return state_->chat_renderer.render(detail::to_internal(messages)); });
}

std::vector<int32_t> Model::tokenize_chat(const std::vector<ChatMessage>& messages) const {
  return detail::translating_errors([&] {
    const Tokenizer& tokenizer = state_->tokenizer;
    const chat::RenderedChat chat =
        state_->chat_renderer.render_for_tokenizer(detail::to_internal(messages), tokenizer);
    // A template that writes BOS itself must not get a second one from the tokenizer.
    const bool add_bos = tokenizer.vocab().add_bos && !state_->chat_renderer.starts_with_bos(chat.text);
    return tokenizer.encode(chat.text, add_bos, chat.special_spans);
  });
}

std::string Model::chat_format() const { return state_->chat_renderer.name(); }
int32_t Model::vocab_size() const { return static_cast<int32_t>(state_->model->config.vocab_size); }
int64_t Model::context_length() const { return state_->model->config.context_length; }
int32_t Model::bos_token() const { return state_->tokenizer.vocab().bos_id; }
int32_t Model::eos_token() const { return state_->tokenizer.vocab().eos_id; }
DType detail::kv_dtype(KvCacheType type) {
  switch (type) {
    case KvCacheType::F32: return DType::F32;
    case KvCacheType::F16: return DType::F16;
    case KvCacheType::BF16: return DType::BF16;
    case KvCacheType::Q8_0: return DType::Q8_0;
    case KvCacheType::Q4_0: return DType::Q4_0;
  }
  TANDEM_CHECK_INPUT(false, "unknown KvCacheType {}", static_cast<int>(type));
  return DType::F32;
}

int64_t Model::kv_bytes_per_token(KvCacheType k, KvCacheType v) const {
  return KvCache::bytes_per_token(state_->model->config.kv_shape(), {detail::kv_dtype(k), detail::kv_dtype(v)});
}
const std::string& Model::path() const { return state_->path; }

}  // namespace tandem::api
