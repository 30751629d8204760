// NgramProposer: prompt lookup, the draft-free proposer. The newest n tokens of the sequence
// (prompt and output so far) are looked up among the earlier tokens, longest n first, latest
// match first; the tokens that followed the match are the proposal. Deterministic (a point
// mass for the acceptance rule), stateless, never allocates once `draft` has its capacity.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem {

class NgramProposer {
 public:
  // n-gram sizes ngram_min..ngram_max (1 <= min <= max), as SpeculationParams checked them.
  NgramProposer(int32_t ngram_min, int32_t ngram_max);

  // Replaces `draft` with up to max_draft tokens predicted to follow `tokens`; empty when no
  // n-gram of the allowed sizes recurs. A match whose continuation reaches the end of
  // `tokens` repeats with the match's period (a loop keeps looping).
  void propose(std::span<const int32_t> tokens, int32_t max_draft, std::vector<int32_t>& draft) const;

 private:
  int32_t ngram_min_;
  int32_t ngram_max_;
};

}  // namespace tandem
