// route_token: softmax in f32 (max subtracted, sum in expert order), top-k by repeated scans
// (n_used is small: 2 for Mixtral, 8 for Qwen3-30B-A3B of 128), then the renormalisation.
#include "model/moe_router.h"

#include <cmath>

#include "base/error.h"

namespace tandem {

namespace {
// The n_used largest of values [n_experts] in decreasing order; strict > keeps the lower index on a tie.
void top_k(const float* values, int64_t n_experts, int64_t n_used, int32_t* experts) {
  for (int64_t k = 0; k < n_used; ++k) {
    int64_t best = -1;
    for (int64_t e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int64_t j = 0; j < k && !taken; ++j) taken = experts[j] == e;
      if (!taken && (best < 0 || values[e] > values[best])) best = e;
    }
    experts[k] = static_cast<int32_t>(best);
  }
}
}  // namespace

void route_token(const float* logits, int64_t n_experts, int64_t n_used, bool renormalise, float* probabilities,
                 int32_t* experts, float* weights) {
  TANDEM_ASSERT(n_used >= 1 && n_used <= n_experts);
  float max_logit = logits[0];
  for (int64_t e = 1; e < n_experts; ++e) max_logit = std::fmax(max_logit, logits[e]);
  float sum = 0.0f;
  for (int64_t e = 0; e < n_experts; ++e) sum += (probabilities[e] = std::exp(logits[e] - max_logit));
  for (int64_t e = 0; e < n_experts; ++e) probabilities[e] /= sum;
  top_k(probabilities, n_experts, n_used, experts);
  for (int64_t k = 0; k < n_used; ++k) weights[k] = probabilities[experts[k]];
  if (!renormalise) return;
  float chosen = 0.0f;
  for (int64_t k = 0; k < n_used; ++k) chosen += weights[k];
  for (int64_t k = 0; k < n_used; ++k) weights[k] /= chosen;
}

void route_token_topk_softmax(const float* logits, int64_t n_experts, int64_t n_used, int32_t* experts,
                              float* weights) {
  TANDEM_ASSERT(n_used >= 1 && n_used <= n_experts);
  top_k(logits, n_experts, n_used, experts);
  const float max_logit = logits[experts[0]];  // the largest: chosen first
  float sum = 0.0f;
  for (int64_t k = 0; k < n_used; ++k) sum += (weights[k] = std::exp(logits[experts[k]] - max_logit));
  for (int64_t k = 0; k < n_used; ++k) weights[k] /= sum;
}

}  // namespace tandem
