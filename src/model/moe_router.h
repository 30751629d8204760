// The mixture-of-experts router's choice for one token: softmax over every expert's router
// logit, the n_used most probable experts (ties to the lower expert index), and their weights,
// renormalised to sum to 1 when the family does (Mixtral; qwen3moe's norm_topk_prob); or, for
// gpt-oss, top-k on the logits first and the softmax over the chosen ones. Pure
// arithmetic on one row, in a fixed order, so a token's choice never depends on its batch.
#pragma once

#include <cstdint>

namespace tandem {

// logits [n_experts] -> experts [n_used] (in decreasing probability) and weights [n_used];
// `probabilities` is scratch [n_experts].
void route_token(const float* logits, int64_t n_experts, int64_t n_used, bool renormalise, float* probabilities,
                 int32_t* experts, float* weights);

// gpt-oss's gating (llama.cpp's SOFTMAX_WEIGHT): the n_used largest logits (ties to the lower
// expert index), in decreasing order, and weights the softmax over those n_used logits alone.
// logits [n_experts] (router bias included) -> experts [n_used], weights [n_used].
void route_token_topk_softmax(const float* logits, int64_t n_experts, int64_t n_used, int32_t* experts, float* weights);

}  // namespace tandem
