// RejectionSampler: the acceptance rule of speculative sampling (Leviathan et al. 2023, Chen
// et al. 2023). A token x drawn from the draft's distribution q is kept with probability
// min(1, p(x) / q(x)), p being the target's; on rejection the replacement is drawn from
// norm(max(0, p - q)). The token that comes out is distributed exactly as p, whatever q is.
// p and q are the Sampler's final distributions (after penalties, temperature, top-k, top-p,
// min-p), so "exactly as p" means exactly as plain sampling. No model, no RNG of its own.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sampler.h"

namespace tandem {

struct SpeculativeVerdict {
  int32_t token = 0;      // x when accepted, else the replacement
  bool accepted = false;  // the draft token stands (decoding continues with the next one)
};

class RejectionSampler {
 public:
  explicit RejectionSampler(int64_t vocab_size);  // scratch for the residual, allocated once

  // Judges draft token x against target p and draft q with two uniforms in [0, 1):
  // u_accept for the coin, u_resample for the replacement (unused when accepted).
  // A q that is a point mass on x (a deterministic proposer) reduces this to "keep x with
  // probability p(x), else draw from p without x".
  SpeculativeVerdict verify(TokenDistribution p, TokenDistribution q, int32_t x, double u_accept, double u_resample);

 private:
  std::vector<float> q_dense_;  // [vocab_size] q by token id; all zero between calls
};

}  // namespace tandem
