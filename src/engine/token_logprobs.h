// TokenLogprobs: the log-probabilities an event reports for a sampled token (OpenAI's
// `logprobs`): the chosen token's and the top_n most probable, from the model's own logits
// (before temperature and truncation). Owns its [vocab_size] scratch, made once; the engine
// thread is its only user.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/generation_service.h"
#include "tokenizer/tokenizer.h"

namespace tandem {

class TokenLogprobs {
 public:
  // `tokenizer` names the tokens (their raw bytes) and must outlive this.
  TokenLogprobs(const Tokenizer& tokenizer, int64_t vocab_size);

  // logits [vocab_size]; ties in the top list go to the lower id; NaN logits count as -inf.
  TokenLogprob of(std::span<const float> logits, int32_t chosen, int32_t top_n);

 private:
  const Tokenizer& tokenizer_;
  std::vector<float> work_;   // [vocab_size] the logits, NaN as -inf
  std::vector<int32_t> ids_;  // [vocab_size] sorted by work_ for the top list
};

}  // namespace tandem
