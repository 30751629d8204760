// The dispatch table: every per-CPU choice of the kernels — matrix products per weight type,
// activation quantizers, attention, SwiGLU (plain and gpt-oss's clamped one), RMSNorm, RoPE,
// GeGLU, soft-caps, whether weights are repacked at load — for one instruction-set level.
// Chosen once per process (kernel_table(), from active_isa() in cpu_features.h); nothing else
// in the build tests the CPU level. Tests call each level's table directly (kernel_table(isa))
// to hold it against the scalar references, and TANDEM_ISA=avx2|avx512|scalar runs a lower
// level's real code on a newer CPU.
//
// How the levels are written: hand-written intrinsics per level, each file under
// kernels/<level>/ compiled for its ISA with a target pragma (the rest of the build stays
// generic x86-64), the tile shapes templated over rows x tokens. Not Highway: the 8-bit dot
// products (maddubs/madd, dpbusd, AMX tiles) and the packed layouts differ per level in ways a
// width-generic wrapper does not hide, and the integer tricks are where the speed is.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "base/tensor_view.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"

namespace tandem {

// out[t * out_stride + r] = dot(weight row r, activation row t) for r in [row_begin, row_end),
// t in [0, n_tokens). Each output element's arithmetic is the same whatever the row range or
// token count (batch invariance); kernels only choose how many rows/tokens share a pass.
using GemmFloatFn = void (*)(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x,
                             int64_t n_tokens, float* out, int64_t out_stride);
using GemmQ8Fn = void (*)(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                          int64_t n_tokens, float* out, int64_t out_stride);
using GemmQ8KFn = void (*)(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                           int64_t n_tokens, float* out, int64_t out_stride);

using QuantizeQ8Fn = void (*)(const float* x, int64_t n, ActivationBlockQ8* out);
using QuantizeQ8KFn = void (*)(const float* x, int64_t n, ActivationBlockQ8K* out);
// dot(k-quant weight row, activation row) (dot_kquants.h); every level gives the same bits.
using DotQ8KFn = float (*)(DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n);

// attention_group and attention_tokens (kernels/attention.h) of one level, over one segment
// of positions (the tiles from position 0; kernels/attention.cpp splits longer contexts):
// partials null, the outputs normalised (sinks joining the softmax); partials not null, the
// outputs left as accumulators and partials[j] (query j: token t's head g at t·group + g)
// each query's max and sum, sinks ignored.
using AttentionFn = void (*)(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                             int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                             float* out, float softcap, const float* sinks, AttentionPartial* partials);
using AttentionTokensFn = void (*)(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                                   const int32_t* positions, const KvRows& keys, const KvRows& values,
                                   int64_t kv_offset, const int32_t* slots, int64_t head_dim, float* scratch,
                                   float* out, int64_t out_stride, float softcap, const float* sinks,
                                   AttentionPartial* partials);
// convert_kv_rows (kernels/attention.h) of one level: the same floats at every level.
using ConvertKvRowsFn = void (*)(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset,
                                 int64_t n, float* out);
using SwigluFn = void (*)(const float* gate, const float* up, int64_t n, float* out);
// rmsnorm_row and rope_apply (kernels/elementwise.h) of one level.
using RmsnormFn = void (*)(const float* x, const float* weight, int64_t n, float eps, float* out);
using RopeFn = void (*)(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos_table,
                        const float* sin_table);
// geglu_row and softcap_row (kernels/geglu.h) of one level.
using GegluFn = void (*)(const float* gate, const float* up, int64_t n, float* out);
using SoftcapFn = void (*)(const float* x, int64_t n, float cap, float* out);
// swiglu_oai_row (kernels/swiglu_oai.h) of one level.
using SwigluOaiFn = void (*)(const float* gate, const float* up, int64_t n, float* out);

// A level's own weight layouts, written once at load (model/weight_packing.cpp) into
// TensorView::packed, which that level's GEMMs then read. packable says which weights it
// has a layout for (the others stay as the file has them); packing a matrix in slices of
// whole row groups (1024 rows) and concatenating them gives the packing of the whole.
// All null on levels that read the file's layout.
struct WeightPacker {
  bool (*packable)(const TensorView& weight) = nullptr;
  int64_t (*packed_bytes)(const TensorView& weight) = nullptr;
  void (*pack_into)(const TensorView& weight, uint8_t* out) = nullptr;
};

// See active_attention_arithmetic below.
enum class AttentionArithmetic { F32, Bf16, Bf16Values };

struct KernelTable {
  Isa isa;
  GemmFloatFn gemm_float;  // F32, F16, BF16 weights; activations f32
  GemmQ8Fn gemm_q8;        // Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4; activations in 32-element 8-bit blocks
  GemmQ8KFn gemm_q8k;      // Q2_K..Q6_K, Q8_K, IQ4_XS weights; activations in 256-element blocks
  DotQ8KFn dot_q8k;        // one k-quant row against one activation row
  QuantizeQ8Fn quantize_q8;
  QuantizeQ8KFn quantize_q8k;
  AttentionFn attention;               // one KV head's group of query heads for one token
  AttentionTokensFn attention_tokens;  // a run of one sequence's tokens, sharing K/V loads
  ConvertKvRowsFn convert_kv_rows;     // stored K/V rows -> floats, a block at a time
  SwigluFn swiglu;
  RmsnormFn rmsnorm;  // sum of squares in a fixed order per level
  RopeFn rope;
  GegluFn geglu;           // Gemma's FFN activation
  SoftcapFn softcap;       // Gemma 2's final-logit soft-cap (the attention kernels cap their own tiles)
  SwigluOaiFn swiglu_oai;  // gpt-oss's clamped expert activation
  WeightPacker packer;
  AttentionArithmetic attention_arithmetic = AttentionArithmetic::F32;  // of attention, attention_tokens
};

// Packs `weight` for the table's level when it has a layout for it (as the loader does):
// returns the packed bytes and points weight.packed at them; an empty vector otherwise.
std::vector<uint8_t> pack_for_level(const KernelTable& table, TensorView& weight);

// What the attention kernels multiply in. F32 is every level's own kernel and the default.
// On an AVX-512 level with AVX512_BF16, TANDEM_ATTENTION asks for bf16 dot products
// (kernels/avx512/attention_bf16_avx512.cpp): "bf16" rounds Q, K, the softmax weights and V
// to bf16 (the scores lose precision: greedy tokens of a tiny model can differ from f32's),
// "bf16-values" only the weights and V (the scores stay the f32 kernel's). Either is the same
// kernel for prefill and decode, so batch invariance holds as with f32.
std::string_view attention_arithmetic_name(AttentionArithmetic arithmetic);
// Whether the CPU and a level can run `arithmetic` (F32 always).
bool attention_arithmetic_available(Isa isa, AttentionArithmetic arithmetic);
// TANDEM_ATTENTION for the active level: F32 when unset, "f32", or not available here.
AttentionArithmetic active_attention_arithmetic();

// The active level's table, its attention that of active_attention_arithmetic().
const KernelTable& kernel_table();
// A given level (must be supported by the CPU), with the level's own (f32) attention.
const KernelTable& kernel_table(Isa isa);
// A given level's table with the attention of `arithmetic` (must be available).
const KernelTable& kernel_table(Isa isa, AttentionArithmetic arithmetic);

namespace portable {
void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride);
void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride);
void quantize_q8(const float* x, int64_t n, ActivationBlockQ8* out);    // kernels/dot.cpp
void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out);  // kernels/dot_kquants.cpp
void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks, AttentionPartial* partials);
// Token by token through portable::attention_group.
void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap, const float* sinks, AttentionPartial* partials);
// Row by row through dequantize_row (kernels/attention.cpp).
void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out);
void swiglu_row(const float* gate, const float* up, int64_t n, float* out);  // kernels/elementwise.cpp
}  // namespace portable

namespace avx512 {
void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride);
void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride);
// Q5_0, Q5_1, IQ4_NL, MXFP4 on the file's blocks (kernels/avx512/gemm_q32_avx512.cpp); gemm_q8
// hands those types here, at the AVX-512 and AMX levels.
void gemm_q32(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
              int64_t n_tokens, float* out, int64_t out_stride);
void quantize_q8(const float* x, int64_t n, ActivationBlockQ8* out);    // kernels/dot.cpp
void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out);  // kernels/dot_kquants.cpp
void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks, AttentionPartial* partials);
void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out);
// attention_group and attention_tokens with bf16 dot products (kernels/avx512/
// attention_bf16_avx512.cpp): Q, K, the softmax weights and V rounded to bf16, accumulated in
// float. Need AVX512_BF16.
void attention_group_bf16(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                          int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                          float* out, float softcap, const float* sinks, AttentionPartial* partials);
void attention_tokens_bf16(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                           const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                           const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                           float softcap, const float* sinks, AttentionPartial* partials);
// The same with the scores in float (the f32 kernel's), only the weighted values in bf16.
void attention_group_bf16_values(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                                 int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                                 float* scratch, float* out, float softcap, const float* sinks,
                                 AttentionPartial* partials);
void attention_tokens_bf16_values(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                                  const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                                  const int32_t* slots, int64_t head_dim, float* scratch, float* out,
                                  int64_t out_stride, float softcap, const float* sinks, AttentionPartial* partials);
}  // namespace avx512

// The k-quant GEMM of the levels without repacked k-quant weights: each (row, token) one call
// of the level's row dot product, row tiles outside so a tile stays in cache across tokens.
void gemm_q8k_rows(Isa isa, const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                   int64_t n_tokens, float* out, int64_t out_stride);

}  // namespace tandem
