// Attention for one query head of one token: scores against the cached keys of its
// sequence (read through the slot table), softmax, weighted sum of cached values.
// The causal mask is the caller's choice of n_ctx (positions 0..n_ctx-1 are visible).
#pragma once

#include <cstdint>

namespace tandem {

// q_head: [head_dim]; keys/values: [n_slots, kv_width], this head's K/V start at column
// kv_offset; slots: [n_ctx] position -> slot; scores: scratch [n_ctx]; out_head: [head_dim].
void attention_head(const float* q_head, const float* keys, const float* values, int64_t kv_width,
                    int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                    float* scores, float* out_head);

}  // namespace tandem
