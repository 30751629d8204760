// Log-softmax of one logits row and its top entries (see token_logprobs.h): the sum in
// double, so the figures do not depend on the vocabulary's order.
#include "engine/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tandem {

TokenLogprobs::TokenLogprobs(const Tokenizer& tokenizer, int64_t vocab_size)
    : tokenizer_(tokenizer), work_(static_cast<size_t>(vocab_size)), ids_(static_cast<size_t>(vocab_size)) {}

TokenLogprob TokenLogprobs::of(std::span<const float> logits, int32_t chosen, int32_t top_n) {
  const auto vocab = static_cast<int32_t>(logits.size());
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float x : logits)
    if (!std::isnan(x)) max_logit = std::max(max_logit, x);
  double sum = 0.0;
  for (int32_t i = 0; i < vocab; ++i) {
    const float x = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
    work_[static_cast<size_t>(i)] = x;
    sum += std::exp(static_cast<double>(x - max_logit));
  }
  const auto log_z = static_cast<float>(static_cast<double>(max_logit) + std::log(sum));
  const auto entry = [&](int32_t id) {
    return TopLogprob{id, tokenizer_.token_bytes(id), work_[static_cast<size_t>(id)] - log_z};
  };
  TokenLogprob result;
  result.chosen = entry(chosen);
  const int32_t n = std::min(top_n, vocab);
  for (int32_t i = 0; i < vocab; ++i) ids_[static_cast<size_t>(i)] = i;
  std::partial_sort(ids_.begin(), ids_.begin() + n, ids_.end(), [&](int32_t a, int32_t b) {
    const float la = work_[static_cast<size_t>(a)], lb = work_[static_cast<size_t>(b)];
    return la != lb ? la > lb : a < b;
  });
  for (int32_t i = 0; i < n; ++i) result.top.push_back(entry(ids_[static_cast<size_t>(i)]));
  return result;
}

}  // namespace tandem
