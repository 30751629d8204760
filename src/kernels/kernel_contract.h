// The kernels' contract: the dispatch table's type, every per-CPU choice of the kernels —
// matrix products per weight type, activation quantizers, attention, SwiGLU (plain and
// gpt-oss's clamped one), RMSNorm, RoPE, GeGLU, soft-caps, whether weights are repacked at
// load — for one instruction-set level.
// Each level builds its table in its folder as the level below plus its overrides and declares
// it in its header (kernels/portable_kernels.h, avx2/avx2_kernels.h, avx512/avx512_kernels.h,
// amx/amx_kernels.h); kernel_table.cpp is the hub that picks one. Levels include this header
// and the header of the level below, never the hub.
//
// How the levels are written: hand-written intrinsics per level, each file under
// kernels/<level>/ compiled for its ISA with a target pragma (the rest of the build stays
// generic x86-64), the tile shapes templated over rows x tokens. Not Highway: the 8-bit dot
// products (maddubs/madd, dpbusd, AMX tiles) and the packed layouts differ per level in ways a
// width-generic wrapper does not hide, and the integer tricks are where the speed is.
#pragma once

#include <cstdint>
#include "base/tensor_view.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"
#include "kernels/instruction_peak.h"

namespace tandem {

// Each slot of the table has a function type (XKernel), which the levels' headers declare their
// kernels with, and a pointer type (XFn).

// out[t * out_stride + r] = dot(weight row r, activation row t) for r in [row_begin, row_end),
// t in [0, n_tokens). Each output element's arithmetic is the same whatever the row range or
// token count (batch invariance); kernels only choose how many rows/tokens share a pass.
using GemmFloatKernel = void(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x,
                             int64_t n_tokens, float* out, int64_t out_stride);
using GemmFloatFn = GemmFloatKernel*;
using GemmQ8Kernel = void(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                          int64_t n_tokens, float* out, int64_t out_stride);
using GemmQ8Fn = GemmQ8Kernel*;
using GemmQ8KKernel = void(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                           int64_t n_tokens, float* out, int64_t out_stride);
using GemmQ8KFn = GemmQ8KKernel*;

using QuantizeQ8Kernel = void(const float* x, int64_t n, ActivationBlockQ8* out);
using QuantizeQ8Fn = QuantizeQ8Kernel*;
using QuantizeQ8KKernel = void(const float* x, int64_t n, ActivationBlockQ8K* out);
using QuantizeQ8KFn = QuantizeQ8KKernel*;
// The level's row kernel for one k-quant type (dot_kquants.h: KQuantRowDotFn), nullptr for any
// other type; every level's gives the same bits.
using KQuantRowDotOfFn = KQuantRowDotFn (*)(DType type);

// attention_group and attention_tokens (kernels/attention.h) of one level, over one segment
// of positions (the tiles from position 0; kernels/attention.cpp splits longer contexts):
// partials null, the outputs normalised (sinks joining the softmax); partials not null, the
// outputs left as accumulators and partials[j] (query j: token t's head g at t·group + g)
// each query's max and sum, sinks ignored.
using AttentionKernel = void(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                             int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                             float* out, float softcap, const float* sinks, AttentionPartial* partials);
using AttentionFn = AttentionKernel*;
using AttentionTokensKernel = void(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                                   const int32_t* positions, const KvRows& keys, const KvRows& values,
                                   int64_t kv_offset, const int32_t* slots, int64_t head_dim, float* scratch,
                                   float* out, int64_t out_stride, float softcap, const float* sinks,
                                   AttentionPartial* partials);
using AttentionTokensFn = AttentionTokensKernel*;
// convert_kv_rows (kernels/attention.h) of one level: the same floats at every level.
using ConvertKvRowsKernel = void(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset,
                                 int64_t n, float* out);
using ConvertKvRowsFn = ConvertKvRowsKernel*;
using SwigluKernel = void(const float* gate, const float* up, int64_t n, float* out);
using SwigluFn = SwigluKernel*;
// rmsnorm_row and rope_apply (kernels/elementwise.h) of one level.
using RmsnormKernel = void(const float* x, const float* weight, int64_t n, float eps, float* out);
using RmsnormFn = RmsnormKernel*;
using RopeKernel = void(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos_table,
                        const float* sin_table);
using RopeFn = RopeKernel*;
// geglu_row and softcap_row (kernels/geglu.h) of one level.
using GegluKernel = void(const float* gate, const float* up, int64_t n, float* out);
using GegluFn = GegluKernel*;
using SoftcapKernel = void(const float* x, int64_t n, float cap, float* out);
using SoftcapFn = SoftcapKernel*;
// swiglu_oai_row (kernels/swiglu_oai.h) of one level.
using SwigluOaiKernel = void(const float* gate, const float* up, int64_t n, float* out);
using SwigluOaiFn = SwigluOaiKernel*;

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

// A level's loops of one instruction (kernels/instruction_peak.h), null where the level or the
// CPU has no such instruction.
struct InstructionLoops {
  InstructionLoopFn fma_f32 = nullptr;
  InstructionLoopFn dot_bf16 = nullptr;
  InstructionLoopFn tile_bf16 = nullptr;
  // The 8-bit multiply the level's quantized GEMMs are built on: AVX2 vpmaddubsw (+ vpaddw),
  // AVX-512 VNNI vpdpbusd.
  InstructionLoopFn dot_i8 = nullptr;
};

// What the attention kernels multiply in (kernel_table.h: active_attention_arithmetic).
enum class AttentionArithmetic { F32, Bf16, Bf16Values };

struct KernelTable {
  Isa isa;
  GemmFloatFn gemm_float;           // F32, F16, BF16 weights; activations f32
  GemmQ8Fn gemm_q8;                 // Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4; activations in 32-element 8-bit blocks
  GemmQ8KFn gemm_q8k;               // Q2_K..Q6_K, Q8_K, IQ4_XS weights; activations in 256-element blocks
  KQuantRowDotOfFn kquant_row_dot;  // one k-quant row against one activation row, per type
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
  InstructionLoops instruction_loops;  // the ceilings of bench --machine, not used by a forward pass
  AttentionArithmetic attention_arithmetic = AttentionArithmetic::F32;  // of attention, attention_tokens
  bool attention_on_tiles = false;  // attention, attention_tokens are AMX tile kernels (amx_table.cpp)
};

}  // namespace tandem
