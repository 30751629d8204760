// TextGenerator (include/tandem/tandem.h): model + tokenizer + thread pool behind one object;
// each generate() call gets a fresh KV cache region and sampler.
#include <algorithm>

#include "base/thread_pool.h"
#include "model/model.h"
#include "tandem/tandem.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/streaming_detokenizer.h"

namespace tandem {

struct TextGenerator::State {
  std::shared_ptr<const Model> model;
  Tokenizer tokenizer;
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<KvCache> cache;
};

TextGenerator::TextGenerator(std::unique_ptr<State> state) : state_(std::move(state)) {}
TextGenerator::~TextGenerator() = default;
TextGenerator::TextGenerator(TextGenerator&&) noexcept = default;
TextGenerator& TextGenerator::operator=(TextGenerator&&) noexcept = default;

TextGenerator TextGenerator::load(const std::string& model_path, const std::string& tokenizer_path, int threads) {
  std::shared_ptr<const Model> model = load_model(model_path);
  Tokenizer tokenizer = load_tokenizer(model_path, tokenizer_path, model->config.vocab_size);
  TANDEM_CHECK_INPUT(tokenizer.vocab().size() == model->config.vocab_size,
                     "the tokenizer has {} tokens but the model's vocabulary is {}", tokenizer.vocab().size(),
                     model->config.vocab_size);
  auto state = std::unique_ptr<State>(new State{model, std::move(tokenizer), std::make_unique<ThreadPool>(threads),
                                                std::make_unique<KvCache>(model->config.kv_shape(), model->config.context_length, 1)});
  return TextGenerator(std::move(state));
}

GenerateResponse TextGenerator::generate(const GenerateRequest& request,
                                         const std::function<void(std::string_view)>& on_text) {
  const std::vector<int32_t> prompt = tokenize(request.prompt, state_->tokenizer.vocab().add_bos);
  TANDEM_CHECK_INPUT(static_cast<int64_t>(prompt.size()) <= state_->model->config.context_length,
                     "the prompt is {} tokens long but the model's context is {} tokens", prompt.size(),
                     state_->model->config.context_length);
  Forward forward(state_->model, static_cast<int64_t>(prompt.size()), *state_->pool);
  Sampler sampler(request.sampling, state_->model->config.vocab_size);
  state_->cache->release(0);
  StreamingDetokenizer detokenizer(state_->tokenizer);
  for (int32_t id : prompt) detokenizer.push(id);
  GenerateResponse response;
  const int32_t eos = state_->tokenizer.vocab().eos_id;
  GenerationResult result = tandem::generate(forward, *state_->cache, sampler, prompt, request.max_new_tokens, eos, 0,
                                             [&](int32_t token) {
                                               if (token == eos) return;
                                               const std::string piece = detokenizer.push(token);
                                               response.text += piece;
                                               if (on_text && !piece.empty()) on_text(piece);
                                             });
  const std::string rest = detokenizer.finish();
  response.text += rest;
  if (on_text && !rest.empty()) on_text(rest);
  response.tokens = std::move(result.tokens);
  response.stop_reason = result.stop_reason;
  response.timings = std::move(result.timings);
  return response;
}

std::vector<int32_t> TextGenerator::tokenize(std::string_view text, bool add_bos) const {
  return state_->tokenizer.encode(text, add_bos);
}

std::string TextGenerator::detokenize(const std::vector<int32_t>& ids) const { return state_->tokenizer.decode(ids); }

}  // namespace tandem
