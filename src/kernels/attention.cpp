// attention_group: per tile, scores for every (query, position), then each query's running
// max/sum/accumulator is rescaled and the tile's values added in position order. The
// sequence of operations for one query is the same whoever else is in its group or batch.
// attention_tokens: the active level's kernel (kernel_table().attention_tokens); the portable
// one goes token by token. Rows stored in another type than F32 are converted one at a time
// into a stack buffer as they are visited (dequantize_row), never the whole history.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

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
                     float* out, float softcap, const float* sinks, AttentionPartial* partials) {
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
    if (partials != nullptr) {
      partials[g] = {running_max[g], running_sum[g]};
      continue;
    }
    const float inverse = sinks != nullptr ? sink_normaliser(running_max[g], running_sum[g], sinks[g])
                                           : static_cast<float>(1.0 / running_sum[g]);
    float* acc = out + g * head_dim;
    for (int64_t d = 0; d < head_dim; ++d) acc[d] *= inverse;
  }
}

}  // namespace portable

void combine_attention_segments(const float* accs, int64_t acc_stride, const AttentionPartial* partials,
                                int64_t partial_stride, int64_t n_segments, int64_t n_queries, int64_t head_dim,
                                const float* sinks, float* out) {
  TANDEM_ASSERT(n_segments >= 1 && head_dim <= kMaxConvertedHeadDim);
  double combined[kMaxConvertedHeadDim];
  for (int64_t g = 0; g < n_queries; ++g) {
    float largest = sinks != nullptr ? sinks[g] : -INFINITY;
    for (int64_t s = 0; s < n_segments; ++s) largest = std::fmax(largest, partials[s * partial_stride + g].max);
    double sum = sinks != nullptr ? std::exp(static_cast<double>(sinks[g]) - largest) : 0.0;
    std::fill_n(combined, head_dim, 0.0);
    for (int64_t s = 0; s < n_segments; ++s) {
      const AttentionPartial& partial = partials[s * partial_stride + g];
      const double weight = std::exp(static_cast<double>(partial.max) - largest);
      sum += partial.sum * weight;
      const float* acc = accs + s * acc_stride + g * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) combined[d] += static_cast<double>(acc[d]) * weight;
    }
    for (int64_t d = 0; d < head_dim; ++d) out[g * head_dim + d] = static_cast<float>(combined[d] / sum);
  }
}

namespace {
// The segments' accumulators and partials of one call, reused by the thread's later calls.
struct SegmentScratch {
  std::vector<float> accs;
  std::vector<AttentionPartial> partials;
  std::vector<int32_t> positions;
};

SegmentScratch& segment_scratch() {
  thread_local SegmentScratch scratch;
  return scratch;
}

template <typename T>
T* sized(std::vector<T>& buffer, int64_t n) {
  if (static_cast<int64_t>(buffer.size()) < n) buffer.resize(static_cast<size_t>(n));
  return buffer.data();
}
}  // namespace

void attention_group_partial(const KernelTable& table, const float* queries, int64_t n_queries, const KvRows& keys,
                             const KvRows& values, int64_t kv_offset, const int32_t* slots, int64_t n_ctx,
                             int64_t head_dim, float* scratch, float* out, float softcap, AttentionPartial* partials) {
  TANDEM_ASSERT(n_queries >= 1 && n_queries <= kMaxGroup && n_ctx >= 1 && n_ctx <= kAttentionSegment);
  TANDEM_ASSERT(softcap >= 0.0f && partials != nullptr);
  table.attention(queries, n_queries, keys, values, kv_offset, slots, n_ctx, head_dim, scratch, out, softcap, nullptr,
                  partials);
}

void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks) {
  attention_group(kernel_table(), queries, n_queries, keys, values, kv_offset, slots, n_ctx, head_dim, scratch, out,
                  softcap, sinks);
}

void attention_group(const KernelTable& table, const float* queries, int64_t n_queries, const KvRows& keys,
                     const KvRows& values, int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                     float* scratch, float* out, float softcap, const float* sinks) {
  TANDEM_ASSERT(n_queries >= 1 && n_queries <= kMaxGroup && n_ctx >= 1);
  TANDEM_ASSERT(softcap >= 0.0f);
  if (n_ctx <= kAttentionSegment) {
    table.attention(queries, n_queries, keys, values, kv_offset, slots, n_ctx, head_dim, scratch, out, softcap, sinks,
                    nullptr);
    return;
  }
  // One token whose group is the queries: attention_tokens' segments (a query's bits are the
  // same through either kernel entry).
  const auto position = static_cast<int32_t>(n_ctx - 1);
  attention_tokens(table, queries, n_queries * head_dim, 1, n_queries, &position, keys, values, kv_offset, slots,
                   head_dim, scratch, out, n_queries * head_dim, softcap, sinks);
}

void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap, const float* sinks) {
  attention_tokens(kernel_table(), queries, query_stride, n_tokens, group, positions, keys, values, kv_offset, slots,
                   head_dim, scratch, out, out_stride, softcap, sinks);
}

void attention_tokens(const KernelTable& table, const float* queries, int64_t query_stride, int64_t n_tokens,
                      int64_t group, const int32_t* positions, const KvRows& keys, const KvRows& values,
                      int64_t kv_offset, const int32_t* slots, int64_t head_dim, float* scratch, float* out,
                      int64_t out_stride, float softcap, const float* sinks) {
  TANDEM_ASSERT(n_tokens >= 1 && group >= 1 && group <= kMaxGroup && positions[0] >= 0);
  TANDEM_ASSERT(softcap >= 0.0f);
  // The tokens that see one segment (a prefix, positions ascending) go through the kernel as
  // they are; the rest segment by segment.
  int64_t short_tokens = 0;
  while (short_tokens < n_tokens && positions[short_tokens] < kAttentionSegment) ++short_tokens;
  if (short_tokens > 0)
    table.attention_tokens(queries, query_stride, short_tokens, group, positions, keys, values, kv_offset, slots,
                           head_dim, scratch, out, out_stride, softcap, sinks, nullptr);
  if (short_tokens == n_tokens) return;
  const int64_t n_long = n_tokens - short_tokens;
  const float* long_queries = queries + short_tokens * query_stride;
  const int32_t* long_positions = positions + short_tokens;
  const int64_t n_segments = attention_segments(int64_t{long_positions[n_long - 1]} + 1);
  // Segment s's accumulators: [n_long, group, head_dim] (its first tokens, which do not see it,
  // left unwritten); its partials [n_long, group].
  const int64_t stride = n_long * group * head_dim;
  SegmentScratch& segments = segment_scratch();
  float* accs = sized(segments.accs, n_segments * stride);
  AttentionPartial* partials = sized(segments.partials, n_segments * n_long * group);
  int32_t* segment_positions = sized(segments.positions, n_long);
  int64_t first_token = 0;  // the first long token that sees segment s; the later ones do too
  for (int64_t s = 0; s < n_segments; ++s) {
    const int64_t first = s * kAttentionSegment;
    while (long_positions[first_token] < first) ++first_token;
    for (int64_t t = first_token; t < n_long; ++t)
      segment_positions[t] = static_cast<int32_t>(std::min<int64_t>(kAttentionSegment - 1, long_positions[t] - first));
    table.attention_tokens(long_queries + first_token * query_stride, query_stride, n_long - first_token, group,
                           segment_positions + first_token, keys, values, kv_offset, slots + first, head_dim, scratch,
                           accs + s * stride + first_token * group * head_dim, group * head_dim, softcap, nullptr,
                           partials + (s * n_long + first_token) * group);
  }
  // Token t sees segments 0..its own last; their partials are n_long·group apart.
  for (int64_t t = 0; t < n_long; ++t)
    combine_attention_segments(accs + t * group * head_dim, stride, partials + t * group, n_long * group,
                               attention_segments(int64_t{long_positions[t]} + 1), group, head_dim, sinks,
                               out + (short_tokens + t) * out_stride);
}

namespace portable {
// A token at a time is the same arithmetic (each query's result is independent of its companions).
void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap, const float* sinks, AttentionPartial* partials) {
  for (int64_t t = 0; t < n_tokens; ++t)
    portable::attention_group(queries + t * query_stride, group, keys, values, kv_offset, slots,
                              int64_t{positions[t]} + 1, head_dim, scratch, out + t * out_stride, softcap, sinks,
                              partials != nullptr ? partials + t * group : nullptr);
}
}  // namespace portable

void attention_head(const float* q_head, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                    const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch, float* out_head) {
  attention_group(q_head, 1, keys, values, kv_offset, slots, n_ctx, head_dim, scratch, out_head);
}

}  // namespace tandem
