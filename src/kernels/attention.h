// Attention over a sequence's cached K/V, read through its slot table (position -> slot).
// The keys are visited in tiles of kAttentionTile positions starting at position 0, with an
// online softmax (running max and sum), so no score matrix is materialised and the tile
// boundaries — hence the arithmetic — never depend on how a prompt was chunked or batched.
// The query heads that share one KV head (GQA) are processed together: each K/V row is read
// once for the whole group. K/V rows are read in the type the cache stores them in (KvRows):
// the kernels convert each block of positions they visit into a small per-call L1 scratch, and
// the arithmetic on the converted floats is that of f32 rows holding the same values.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/dtype.h"

namespace tandem {

struct KernelTable;  // kernels/kernel_table.h

constexpr int64_t kAttentionTile = 64;

// Above kAttentionSegment visible positions a query's attention is computed per segment of
// that many positions (from its first visible position; the last segment shorter), each with
// its own online softmax, and the segments' partial results are folded in order
// (combine_attention_segments, in double). Up to kAttentionSegment positions there is one
// segment: the tiles' arithmetic alone. A query's bits depend on its own context only, never on
// how the positions are shared out: decode hands a long context's segments to different
// threads, prefill walks them in turn, and both give the same bits for any thread count.
constexpr int64_t kAttentionSegment = 1024;
static_assert(kAttentionSegment % kAttentionTile == 0);

// One query's result over one segment before normalising: the running max of its scores and
// the sum of exp(score - max) (as the level's kernel accumulated it); the accumulator
// Σ exp(score - max)·v stays in the output row.
struct AttentionPartial {
  float max = -INFINITY;
  double sum = 0.0;
};

// Segments of a context of n_ctx positions (1 up to kAttentionSegment).
constexpr int64_t attention_segments(int64_t n_ctx) { return (n_ctx + kAttentionSegment - 1) / kAttentionSegment; }

// One layer's K (or V) rows as the cache stores them: slot s's row starts at
// data + s * row_bytes and holds the kv heads one after another in `type` (F32, F16, BF16,
// Q8_0 or Q4_0; the quantized types in blocks of 32 along the head, so a head is whole blocks).
struct KvRows {
  const uint8_t* data = nullptr;
  int64_t row_bytes = 0;
  DType type = DType::F32;
};

// Rows of floats row_stride floats apart (tests, benchmarks, f32 caches).
inline KvRows f32_kv_rows(const float* rows, int64_t row_stride) {
  return {reinterpret_cast<const uint8_t*>(rows), row_stride * static_cast<int64_t>(sizeof(float)), DType::F32};
}

// Is `type` one the KV cache may store (and attention read)?
constexpr bool kv_type_supported(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0 || type == DType::Q4_0;
}

// The largest head_dim of rows not stored as F32 (the portable kernel converts a row at a time
// into a buffer of this many floats).
constexpr int64_t kMaxConvertedHeadDim = 1024;

// Bytes from a row's start to element `element` of it (a multiple of 32 for the quantized types).
inline int64_t kv_row_offset_bytes(DType type, int64_t element) { return dtype_row_bytes(type, element); }

// Converts n_rows rows' [element_offset, element_offset + n) elements, the rows at
// rows.data + row_offsets[r] (byte offsets), into out + r * n: the values dequantize_row gives,
// bit for bit. The active level's kernel (kernel_table().convert_kv_rows).
void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out);

// Scratch floats attention_group needs for a group of n_queries heads.
constexpr int64_t attention_scratch_floats(int64_t n_queries) { return n_queries * kAttentionTile; }

// Gemma 2's attention logit soft-capping: a score s (q·k / sqrt(head_dim)) becomes
// cap·tanh(s / cap) before the softmax, on the scores of the positions a query sees (the
// masked ones stay -inf); a cap of 0 leaves the kernels' arithmetic exactly as without it.
// The portable kernel computes it with this function, the AVX2 and AVX-512 kernels a tile at
// a time with their level's softcap_row (kernels/geglu.h: a vector tanh within a few ulp).
inline float softcap_score(float score, float cap) { return cap * std::tanh(score / cap); }

// Attention sinks (gpt-oss): a learned logit per query head that joins the softmax's
// denominator and adds no value, so a query may attend to "nothing". With the online softmax's
// running max m and sum s over the visible scores (s counted at m), the output accumulated at m
// is multiplied by the returned factor instead of 1/s: with m' = max(m, sink) and c = exp(m - m'),
// c / (s·c + exp(sink - m')) — the max taken over the scores and the sink, so a sink far above
// every score gives 0 and nothing overflows. Every level calls this one function.
inline float sink_normaliser(float running_max, double running_sum, float sink) {
  const float new_max = std::fmax(running_max, sink);
  const double correction = std::exp(static_cast<double>(running_max - new_max));
  return static_cast<float>(correction / (running_sum * correction + std::exp(static_cast<double>(sink - new_max))));
}

// queries: [n_queries, head_dim] (the group's query heads, contiguous); keys/values: the
// cache's rows [n_slots, row] (KvCache::keys/values), this KV head's columns start at
// element kv_offset; slots: [n_ctx];
// scratch: attention_scratch_floats(n_queries); out: [n_queries, head_dim].
// Positions 0..n_ctx-1 are visible (the caller's causal mask). softcap > 0: scores soft-capped
// (softcap_score) before the softmax. sinks: [n_queries] each query head's sink logit
// (sink_normaliser), or null for none.
// Above kAttentionSegment positions: per segment, then combine_attention_segments.
void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap = 0.0f, const float* sinks = nullptr);

// One segment of attention_group's: the queries over positions 0..n_ctx-1 of `slots`
// (n_ctx <= kAttentionSegment; the caller offsets slots to the segment's first position),
// unnormalised: out holds the accumulators, partials[g] each query's max and sum. No sinks
// here: they join the softmax once, in combine_attention_segments.
void attention_group_partial(const KernelTable& table, const float* queries, int64_t n_queries, const KvRows& keys,
                             const KvRows& values, int64_t kv_offset, const int32_t* slots, int64_t n_ctx,
                             int64_t head_dim, float* scratch, float* out, float softcap, AttentionPartial* partials);

// Folds n_segments partial results of n_queries queries into the normalised output:
// segment s's accumulators are accs + s·acc_stride ([n_queries, head_dim]) and its partials
// partials + s·partial_stride ([n_queries]). With M the largest max (and the sink's logit,
// sinks[g] for query g, when sinks is not null), each segment is weighted by exp(max_s - M), the
// sums and accumulators are summed in segment order in double, and out = acc / sum is rounded
// once to float ([n_queries, head_dim], contiguous).
void combine_attention_segments(const float* accs, int64_t acc_stride, const AttentionPartial* partials,
                                int64_t partial_stride, int64_t n_segments, int64_t n_queries, int64_t head_dim,
                                const float* sinks, float* out);

// attention_group for n_tokens tokens of one sequence attending to one KV head, token t
// seeing positions 0..positions[t] (positions ascending, as a prefill chunk's). Token t's
// group of query heads is queries + t·query_stride ([group, head_dim], contiguous) and goes
// to out + t·out_stride. Every query's result is bit-identical to attention_group's for it
// alone; on AVX-512 the tokens share each K/V row loaded (with one query per token, MHA, a
// single token would have no query to share it with). scratch: attention_scratch_floats(group).
// sinks: [group] the sink logits of the group's query heads (the same for every token), or null.
// Tokens that see more than kAttentionSegment positions go segment by segment (the tokens that
// see a segment share its pass), then combine_attention_segments.
void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap = 0.0f, const float* sinks = nullptr);

// attention_group and attention_tokens on a given level's kernels (the ones above use the
// active level's), so that tests hold each level's segments against the others.
void attention_group(const KernelTable& table, const float* queries, int64_t n_queries, const KvRows& keys,
                     const KvRows& values, int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                     float* scratch, float* out, float softcap, const float* sinks);
void attention_tokens(const KernelTable& table, const float* queries, int64_t query_stride, int64_t n_tokens,
                      int64_t group, const int32_t* positions, const KvRows& keys, const KvRows& values,
                      int64_t kv_offset, const int32_t* slots, int64_t head_dim, float* scratch, float* out,
                      int64_t out_stride, float softcap, const float* sinks);

// The portable kernel's online-softmax step for one query and one tile (the AVX-512 kernel
// has its own, vectorized one): scores[0..tile_len) become exp(score - new running max) in place,
// running_max/running_sum are updated, and the return value is the factor by which the
// output accumulated over earlier tiles must be rescaled.
float online_softmax_tile(float* scores, int64_t tile_len, float& running_max, double& running_sum);

// One query head (a group of one); scratch: attention_scratch_floats(1).
void attention_head(const float* q_head, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                    const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch, float* out_head);

}  // namespace tandem
