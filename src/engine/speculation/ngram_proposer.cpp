// Prompt-lookup proposals (see ngram_proposer.h): a backward scan per n-gram size. The scan
// is O(n_tokens * n) per step, microseconds beside a forward pass at these lengths.
#include "engine/speculation/ngram_proposer.h"

#include <algorithm>

#include "base/error.h"

namespace tandem {

NgramProposer::NgramProposer(int32_t ngram_min, int32_t ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {
  TANDEM_ASSERT(ngram_min_ >= 1 && ngram_min_ <= ngram_max_);
}

void NgramProposer::propose(std::span<const int32_t> tokens, int32_t max_draft, std::vector<int32_t>& draft) const {
  draft.clear();
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  if (max_draft <= 0) return;
  for (int64_t n = std::min<int64_t>(ngram_max_, n_tokens - 1); n >= ngram_min_; --n) {
    const std::span<const int32_t> suffix = tokens.last(static_cast<size_t>(n));
    // Latest earlier occurrence first: recent text predicts the next tokens best.
    for (int64_t start = n_tokens - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      // What followed the match; past the end of `tokens` the proposal continues itself, so
      // "x y x y" after "x y" proposes "x y x y ..." rather than stopping at the end.
      const int64_t from = start + n;
      for (int64_t i = 0; i < max_draft; ++i) {
        const int64_t source = from + i;
        draft.push_back(source < n_tokens ? tokens[static_cast<size_t>(source)]
                                          : draft[static_cast<size_t>(source - n_tokens)]);
      }
      return;
    }
  }
}

}  // namespace tandem
