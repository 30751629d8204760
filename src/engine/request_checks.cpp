// The request checks (see request_checks.h): each failure is an InputError naming the field.
#include "engine/request_checks.h"

#include <string>
#include <vector>

#include "base/error.h"
#include "engine/speculation/speculation_params.h"

namespace tandem {

void check_generation_request(std::span<const int32_t> prompt, const GenerationParams& params, int64_t vocab,
                              int64_t context_length) {
  TANDEM_CHECK_INPUT(!prompt.empty(), "the prompt is empty");
  TANDEM_CHECK_INPUT(static_cast<int64_t>(prompt.size()) <= context_length,
                     "the prompt has {} tokens but the context is {} tokens", prompt.size(), context_length);
  for (int32_t id : prompt) TANDEM_CHECK_INPUT(id >= 0 && id < vocab, "token id {} is outside the vocabulary", id);
  TANDEM_CHECK_INPUT(params.top_logprobs <= 20, "top_logprobs must be at most 20");
  for (int32_t id : params.stop_token_ids)
    TANDEM_CHECK_INPUT(id >= 0 && id < vocab, "stop token id {} is outside the vocabulary", id);
  TANDEM_CHECK_INPUT(params.min_tokens >= 0 && params.min_tokens <= params.max_tokens,
                     "min_tokens must be between 0 and max_tokens ({}), not {}", params.max_tokens, params.min_tokens);
  for (const std::string& stop : params.stop) TANDEM_CHECK_INPUT(!stop.empty(), "a stop string is empty");
  for (const std::vector<int32_t>& word : params.bad_words) {
    TANDEM_CHECK_INPUT(!word.empty(), "a bad word has no tokens");
    for (int32_t id : word)
      TANDEM_CHECK_INPUT(id >= 0 && id < vocab, "bad word token {} is outside the vocabulary", id);
  }
}

void check_submission(std::span<const int32_t> prompt, const GenerationParams& params, int64_t vocab,
                      int64_t context_length, bool has_draft_model) {
  TANDEM_CHECK_INPUT(params.max_tokens >= 1, "max_tokens must be at least 1");
  check_generation_request(prompt, params, vocab, context_length);
  check_speculation(params.speculation);
  TANDEM_CHECK_INPUT(params.speculation.type != SpeculationType::Draft || has_draft_model,
                     "speculative decoding with a draft model: no draft model is loaded (--draft-model)");
  TANDEM_CHECK_INPUT(params.pooling == Pooling::None || (!params.grammar && !params.speculation.enabled()),
                     "an embedding request neither samples nor speculates: no grammar, no speculation");
}

}  // namespace tandem
