// Tandem's public API: load a model and generate text, without the CLI.
//
//   auto generator = tandem::TextGenerator::load("model.gguf");
//   tandem::GenerateRequest request{.prompt = "The dream", .max_new_tokens = 64};
//   request.sampling.temperature = 0;  // greedy
//   generator.generate(request, [](std::string_view text) { std::cout << text; });
//
// Errors in the input (a bad file, a prompt longer than the context) throw tandem::InputError.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "engine/request.h"
#include "engine/sampler.h"

namespace tandem {

struct GenerateRequest {
  std::string prompt;
  int64_t max_new_tokens = 256;
  SamplingParams sampling;
};

struct GenerateResponse {
  std::string text;             // the generated text (prompt not included)
  std::vector<int32_t> tokens;  // BOS, prompt ids, generated ids
  FinishReason finish_reason = FinishReason::None;
};

class TextGenerator {
 public:
  // model_path: .gguf or llama2.c model.bin; tokenizer_path: for llama2.c models (optional
  // when a tokenizer.bin sits beside the model); threads <= 0: all cores.
  static TextGenerator load(const std::string& model_path, const std::string& tokenizer_path = "", int threads = 0);
  ~TextGenerator();
  TextGenerator(TextGenerator&&) noexcept;
  TextGenerator& operator=(TextGenerator&&) noexcept;

  // Generates a continuation of request.prompt; on_text (optional) receives text pieces
  // as they are decoded, never half a UTF-8 character.
  GenerateResponse generate(const GenerateRequest& request,
                            const std::function<void(std::string_view)>& on_text = {});

  std::vector<int32_t> tokenize(std::string_view text, bool add_bos = true) const;
  std::string detokenize(const std::vector<int32_t>& ids) const;

 private:
  struct State;
  explicit TextGenerator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tandem
