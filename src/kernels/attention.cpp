// attention_group: per tile, scores for every (query, position), then each query's running
// max/sum/accumulator is rescaled and the tile's values added in position order. The
// sequence of operations for one query is the same whoever else is in its group or batch.
// attention_tokens: the active level's kernel (kernel_table().attention_tokens); the portable
// one goes token by token. Rows stored in another type than F32 are converted one at a time
// into a stack buffer as they are visited (dequantize_row), never the whole history.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/quant.h"
#include "kernels/dot.h"
#include "kernels/kernel_table.h"

namespace tandem {

namespace {
constexpr int64_t kMaxGroup = 64;  // query heads per KV head we support

// The head's floats of slot `slot`: in place for F32 rows, else converted into `buffer`.
const float* head_row(const KvRows& rows, int64_t slot, int64_t offset_bytes, int64_t head_dim, float* buffer) {
  const uint8_t* row = rows.data + slot * rows.row_bytes + offset_bytes;
  if (rows.type == DType::F32) return reinterpret_cast<const float*>(row);
  dequantize_row(rows.type, row, buffer, head_dim);
  return buffer;
}
}  // namespace

void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out) {
  kernel_table().convert_kv_rows(rows, row_offsets, n_rows, element_offset, n, out);
}

namespace portable {
void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out) {
  const int64_t offset_bytes = kv_row_offset_bytes(rows.type, element_offset);
  for (int64_t r = 0; r < n_rows; ++r)
    dequantize_row(rows.type, rows.data + row_offsets[r] + offset_bytes, out + r * n, n);
}
}  // namespace portable

float online_softmax_tile(float* scores, int64_t tile_len, float& running_max, double& running_sum) {
  float tile_max = -INFINITY;
  for (int64_t p = 0; p < tile_len; ++p) tile_max = std::fmax(tile_max, scores[p]);
  const float new_max = std::fmax(running_max, tile_max);
  const float correction = std::exp(running_max - new_max);  // exp(-inf) = 0 on the first tile
  running_max = new_max;
  double tile_sum = 0.0;
  for (int64_t p = 0; p < tile_len; ++p) {
    scores[p] = std::exp(scores[p] - new_max);
    tile_sum += scores[p];
  }
  running_sum = running_sum * correction + tile_sum;
  return correction;
}

namespace portable {

void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks) {
  TANDEM_ASSERT(n_queries >= 1 && n_queries <= kMaxGroup && n_ctx >= 1);
  TANDEM_ASSERT(head_dim <= kMaxConvertedHeadDim || (keys.type == DType::F32 && values.type == DType::F32));
  const int64_t key_offset = kv_row_offset_bytes(keys.type, kv_offset);
  const int64_t value_offset = kv_row_offset_bytes(values.type, kv_offset);
  float converted[kMaxConvertedHeadDim];
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float running_max[kMaxGroup];
  double running_sum[kMaxGroup];
  for (int64_t g = 0; g < n_queries; ++g) {
    running_max[g] = -INFINITY;
    running_sum[g] = 0.0;
    std::fill_n(out + g * head_dim, head_dim, 0.0f);
  }
  for (int64_t tile = 0; tile < n_ctx; tile += kAttentionTile) {
    const int64_t tile_len = std::min(kAttentionTile, n_ctx - tile);
    // Scores: each key row is loaded once for the whole group.
    for (int64_t p = 0; p < tile_len; ++p) {
      const float* k = head_row(keys, slots[tile + p], key_offset, head_dim, converted);
      for (int64_t g = 0; g < n_queries; ++g)
        scratch[g * kAttentionTile + p] = dot_f32(queries + g * head_dim, k, head_dim) * scale;
    }
    if (softcap > 0.0f)
      for (int64_t g = 0; g < n_queries; ++g)
        for (int64_t p = 0; p < tile_len; ++p)
          scratch[g * kAttentionTile + p] = softcap_score(scratch[g * kAttentionTile + p], softcap);
    // Online softmax: rescale what came before to the new maximum, then add this tile.
    for (int64_t g = 0; g < n_queries; ++g) {
      const float correction =
          online_softmax_tile(scratch + g * kAttentionTile, tile_len, running_max[g], running_sum[g]);
      if (correction != 1.0f) {
        float* acc = out + g * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) acc[d] *= correction;
      }
    }
    for (int64_t p = 0; p < tile_len; ++p) {
      const float* v = head_row(values, slots[tile + p], value_offset, head_dim, converted);
      for (int64_t g = 0; g < n_queries; ++g)
        axpy_f32(scratch[g * kAttentionTile + p], v, out + g * head_dim, head_dim);
    }
  }
  for (int64_t g = 0; g < n_queries; ++g) {
    const float inverse = sinks != nullptr ? sink_normaliser(running_max[g], running_sum[g], sinks[g])
                                           : static_cast<float>(1.0 / running_sum[g]);
    float* acc = out + g * head_dim;
    for (int64_t d = 0; d < head_dim; ++d) acc[d] *= inverse;
  }
}

}  // namespace portable

void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks) {
  TANDEM_ASSERT(n_queries >= 1 && n_queries <= kMaxGroup && n_ctx >= 1);
  TANDEM_ASSERT(softcap >= 0.0f);
  kernel_table().attention(queries, n_queries, keys, values, kv_offset, slots, n_ctx, head_dim, scratch, out, softcap,
                           sinks);
}

void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap, const float* sinks) {
  TANDEM_ASSERT(n_tokens >= 1 && group >= 1 && group <= kMaxGroup && positions[0] >= 0);
  TANDEM_ASSERT(softcap >= 0.0f);
  kernel_table().attention_tokens(queries, query_stride, n_tokens, group, positions, keys, values, kv_offset, slots,
                                  head_dim, scratch, out, out_stride, softcap, sinks);
}

namespace portable {
// A token at a time is the same arithmetic (each query's result is independent of its companions).
void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap, const float* sinks) {
  for (int64_t t = 0; t < n_tokens; ++t)
    portable::attention_group(queries + t * query_stride, group, keys, values, kv_offset, slots,
                              int64_t{positions[t]} + 1, head_dim, scratch, out + t * out_stride, softcap, sinks);
}
}  // namespace portable

void attention_head(const float* q_head, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                    const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch, float* out_head) {
  attention_group(q_head, 1, keys, values, kv_offset, slots, n_ctx, head_dim, scratch, out_head);
}

}  // namespace tandem
