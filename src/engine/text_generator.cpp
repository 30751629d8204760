// TextGenerator (include/tandem/tandem.h): model + tokenizer + thread pool behind one object;
// each generate() call runs a one-request Engine (the one generation loop).
#include <algorithm>

#include "base/thread_pool.h"
#include "model/model.h"
#include "tandem/tandem.h"
#include "tokenizer/load_tokenizer.h"
#include "engine/engine.h"

namespace tandem {

struct TextGenerator::State {
  std::shared_ptr<const Model> model;
  Tokenizer tokenizer;
  std::unique_ptr<ThreadPool> pool;
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
  auto state = std::unique_ptr<State>(new State{model, std::move(tokenizer), std::make_unique<ThreadPool>(threads)});
  return TextGenerator(std::move(state));
}

GenerateResponse TextGenerator::generate(const GenerateRequest& request,
                                         const std::function<void(std::string_view)>& on_text) {
  const std::vector<int32_t> prompt = tokenize(request.prompt, state_->tokenizer.vocab().add_bos);
  TANDEM_CHECK_INPUT(static_cast<int64_t>(prompt.size()) <= state_->model->config.context_length,
                     "the prompt is {} tokens long but the model's context is {} tokens", prompt.size(),
                     state_->model->config.context_length);
  EngineConfig config;
  config.max_seqs = 1;
  config.max_batch_tokens = std::max<int64_t>(1, static_cast<int64_t>(prompt.size()));
  Engine engine(state_->model, state_->tokenizer, config, *state_->pool);
  GenerationParams params;
  params.sampling = request.sampling;
  params.max_tokens = request.max_new_tokens;
  GenerateResponse response;
  response.tokens = prompt;
  engine.submit(prompt, params, [&](RequestEvent&& event) {
    response.tokens.insert(response.tokens.end(), event.tokens.begin(), event.tokens.end());
    response.text += event.text;
    if (on_text && !event.text.empty()) on_text(event.text);
    if (event.finished) response.finish_reason = event.finish_reason;
  });
  engine.run_until_idle();
  return response;
}

std::vector<int32_t> TextGenerator::tokenize(std::string_view text, bool add_bos) const {
  return state_->tokenizer.encode(text, add_bos);
}

std::string TextGenerator::detokenize(const std::vector<int32_t>& ids) const { return state_->tokenizer.decode(ids); }

}  // namespace tandem
