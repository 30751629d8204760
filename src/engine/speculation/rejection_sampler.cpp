// Speculative sampling's accept / resample rule (see rejection_sampler.h). q is scattered
// into a dense row for O(1) lookups while p's support is walked, then cleared through its
// own ids, so a call costs O(|p| + |q|) whatever the vocabulary size.
#include "engine/speculation/rejection_sampler.h"

#include <algorithm>

#include "base/error.h"

namespace tandem {

RejectionSampler::RejectionSampler(int64_t vocab_size) : q_dense_(static_cast<size_t>(vocab_size), 0.0f) {}

SpeculativeVerdict RejectionSampler::verify(TokenDistribution p, TokenDistribution q, int32_t x, double u_accept,
                                            double u_resample) {
  TANDEM_ASSERT(!p.ids.empty() && x >= 0 && static_cast<size_t>(x) < q_dense_.size());
  const double p_x = p.probability_of(x);
  const double q_x = q.probability_of(x);
  // u < p/q, written without the division; q_x == 0 (x outside q) accepts whenever p_x > 0.
  if (p_x > 0.0 && u_accept * q_x < p_x) return {x, true};

  for (size_t i = 0; i < q.ids.size(); ++i) q_dense_[static_cast<size_t>(q.ids[i])] = q.probs[i];
  // The residual max(0, p - q) lives on p's support; walk it twice: its mass, then the draw.
  double mass = 0.0;
  for (size_t i = 0; i < p.ids.size(); ++i)
    mass += std::max(0.0, static_cast<double>(p.probs[i]) - q_dense_[static_cast<size_t>(p.ids[i])]);
  int32_t token = -1;
  if (mass > 0.0) {
    const double target = u_resample * mass;
    double cumulative = 0.0;
    for (size_t i = 0; i < p.ids.size() && token < 0; ++i) {
      const double residual = std::max(0.0, static_cast<double>(p.probs[i]) - q_dense_[static_cast<size_t>(p.ids[i])]);
      cumulative += residual;
      if (residual > 0.0 && target < cumulative) token = p.ids[i];
    }
    // Rounding left target a hair past the last residual: the last token with mass.
    for (size_t i = p.ids.size(); token < 0 && i-- > 0;)
      if (static_cast<double>(p.probs[i]) > q_dense_[static_cast<size_t>(p.ids[i])]) token = p.ids[i];
  }
  // No residual mass means p <= q everywhere, i.e. p == q up to rounding, where a rejection
  // has probability ~0: p itself is then the right distribution to draw from.
  if (token < 0) token = Sampler::draw(p, u_resample);
  for (int32_t id : q.ids) q_dense_[static_cast<size_t>(id)] = 0.0f;
  return {token, false};
}

}  // namespace tandem
