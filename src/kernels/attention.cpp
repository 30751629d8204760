// attention_head: scores in position order, softmax, then values accumulated in position
// order — the same order whether the token came in a prefill batch or alone in decode.
#include "kernels/attention.h"

#include <cmath>

#include "kernels/dot.h"
#include "kernels/elementwise.h"

namespace tandem {

void attention_head(const float* q_head, const float* keys, const float* values, int64_t kv_width,
                    int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                    float* scores, float* out_head) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int64_t p = 0; p < n_ctx; ++p)
    scores[p] = dot_f32(q_head, keys + slots[p] * kv_width + kv_offset, head_dim) * scale;
  softmax_row(scores, n_ctx);
  for (int64_t d = 0; d < head_dim; ++d) out_head[d] = 0.0f;
  for (int64_t p = 0; p < n_ctx; ++p)
    axpy_f32(scores[p], values + slots[p] * kv_width + kv_offset, out_head, head_dim);
}

}  // namespace tandem
