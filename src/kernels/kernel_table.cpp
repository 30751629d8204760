// kernel_table(): the table of each level, the portable (compiler-vectorized) GEMMs built
// from the row dot products in dot.cpp, the row-dot k-quant GEMM for weights no level
// repacks (Q5_K, Q8_K, Q2_K, Q3_K, IQ4_XS), and each level's packer: which weights it repacks at load into the
// shared layouts of kernels/packed/ (and, from AVX-512 up, the element-major float layout).
#include "kernels/kernel_table.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>

#include "base/error.h"
#include "kernels/amx/amx_gemm.h"
#include "kernels/amx/amx_kquant_gemm.h"
#include "kernels/attention.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/gemm_float_packed.h"
#include "kernels/avx512/gemm_packed.h"
#include "kernels/elementwise.h"
#include "kernels/geglu.h"
#include "kernels/packed/kquant_layout.h"
#include "kernels/packed/q8_layout.h"
#include "kernels/swiglu_oai.h"

namespace tandem {

namespace portable {

void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = row_begin; r < row_end; ++r)
      out[t * out_stride + r] = dot_float_activations(weight.dtype, weight.row(r), x + t * n_in, n_in);
}

void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t r = row_begin; r < row_end; ++r)
      out[t * out_stride + r] = dot_q8_activations(weight.dtype, weight.row(r), x + t * (n_in / 32), n_in);
}

}  // namespace portable

void gemm_q8k_rows(Isa isa, const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                   int64_t n_tokens, float* out, int64_t out_stride) {
  constexpr int64_t kRowTile = 16;
  const int64_t blocks_per_row = weight.row_length() / 256;
  const KQuantRowDotFn dot = kquant_row_dot(isa, weight.dtype);
  for (int64_t tile = row_begin; tile < row_end; tile += kRowTile) {
    const int64_t tile_end = std::min(row_end, tile + kRowTile);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = tile; r < tile_end; ++r)
        out[t * out_stride + r] = dot(weight.row(r), x + t * blocks_per_row, blocks_per_row);
  }
}

namespace {

template <Isa kIsa>
void gemm_q8k_level(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                    int64_t n_tokens, float* out, int64_t out_stride) {
  gemm_q8k_rows(kIsa, weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

// AVX-512 and AMX levels: packed weights go to the kernels on their layout; weights left as
// the file has them (no layout for the type or shape) to the row-major kernels.
void gemm_float_avx512(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                       float* out, int64_t out_stride) {
  if (weight.packed != nullptr)
    return avx512::gemm_float_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  avx512::gemm_float(weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

void gemm_q8_avx512(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                    int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return avx512::gemm_q8_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  avx512::gemm_q8(weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

void gemm_q8k_avx512(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                     int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr)
    return avx512::gemm_kquant_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8k_rows(Isa::Avx512, weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

void gemm_q8k_amx(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                  int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return amx::gemm_kquant(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8k_rows(Isa::Avx512, weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

// The packers. AVX2: the 8-bit integer layouts; AVX-512 and AMX: those and the float one.
bool packable_int8(const TensorView& weight) { return packed::q8_packable(weight) || packed::kquant_packable(weight); }
int64_t packed_bytes_int8(const TensorView& weight) {
  return packed::kquant_packable(weight) ? packed::kquant_packed_bytes(weight) : packed::q8_packed_bytes(weight);
}
void pack_into_int8(const TensorView& weight, uint8_t* out) {
  if (packed::kquant_packable(weight))
    packed::kquant_pack_into(weight, out);
  else
    packed::q8_pack_into(weight, out);
}

bool packable_avx512(const TensorView& weight) { return packable_int8(weight) || avx512::float_packable(weight); }
int64_t packed_bytes_avx512(const TensorView& weight) {
  return avx512::float_packable(weight) ? avx512::float_packed_bytes(weight) : packed_bytes_int8(weight);
}
void pack_into_avx512(const TensorView& weight, uint8_t* out) {
  if (avx512::float_packable(weight))
    avx512::float_pack_into(weight, out);
  else
    pack_into_int8(weight, out);
}

// A level's table whose attention is a bf16 kernel.
KernelTable with_bf16_attention(const KernelTable& level, AttentionArithmetic arithmetic) {
  KernelTable table = level;
  const bool values_only = arithmetic == AttentionArithmetic::Bf16Values;
  table.attention = values_only ? avx512::attention_group_bf16_values : avx512::attention_group_bf16;
  table.attention_tokens = values_only ? avx512::attention_tokens_bf16_values : avx512::attention_tokens_bf16;
  table.attention_arithmetic = arithmetic;
  return table;
}

template <Isa kIsa>
float dot_q8k_level(DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n) {
  return dot_q8k_activations_isa(kIsa, type, weight_row, x, n);
}

}  // namespace

const KernelTable& kernel_table(Isa isa) {
  static const KernelTable kScalar{Isa::Scalar,
                                   portable::gemm_float,
                                   portable::gemm_q8,
                                   gemm_q8k_level<Isa::Scalar>,
                                   dot_q8k_level<Isa::Scalar>,
                                   portable::quantize_q8,
                                   portable::quantize_q8k,
                                   portable::attention_group,
                                   portable::attention_tokens,
                                   portable::convert_kv_rows,
                                   portable::swiglu_row,
                                   rmsnorm_row,
                                   rope_apply,
                                   portable::geglu_row,
                                   portable::softcap_row,
                                   portable::swiglu_oai_row,
                                   {}};
  static const KernelTable kAvx2{Isa::Avx2,
                                 avx2::gemm_float,
                                 avx2::gemm_q8,
                                 avx2::gemm_q8k,
                                 dot_q8k_level<Isa::Avx2>,
                                 avx2::quantize_q8,
                                 avx2::quantize_q8k,
                                 avx2::attention_group,
                                 avx2::attention_tokens,
                                 avx2::convert_kv_rows,
                                 avx2::swiglu_row,
                                 avx2::rmsnorm_row,
                                 avx2::rope_apply,
                                 avx2::geglu_row,
                                 avx2::softcap_row,
                                 avx2::swiglu_oai_row,
                                 {packable_int8, packed_bytes_int8, pack_into_int8}};
  static const KernelTable kAvx512{Isa::Avx512,
                                   gemm_float_avx512,
                                   gemm_q8_avx512,
                                   gemm_q8k_avx512,
                                   dot_q8k_level<Isa::Avx512>,
                                   avx512::quantize_q8,
                                   avx512::quantize_q8k,
                                   avx512::attention_group,
                                   avx512::attention_tokens,
                                   avx512::convert_kv_rows,
                                   avx512::swiglu_row,
                                   avx512::rmsnorm_row,
                                   avx512::rope_apply,
                                   avx512::geglu_row,
                                   avx512::softcap_row,
                                   avx512::swiglu_oai_row,
                                   {packable_avx512, packed_bytes_avx512, pack_into_avx512}};
  static const KernelTable kAmx{Isa::Amx,
                                gemm_float_avx512,
                                amx::gemm_q8,
                                gemm_q8k_amx,
                                dot_q8k_level<Isa::Avx512>,
                                avx512::quantize_q8,
                                avx512::quantize_q8k,
                                avx512::attention_group,
                                avx512::attention_tokens,
                                avx512::convert_kv_rows,
                                avx512::swiglu_row,
                                avx512::rmsnorm_row,
                                avx512::rope_apply,
                                avx512::geglu_row,
                                avx512::softcap_row,
                                avx512::swiglu_oai_row,
                                {packable_avx512, packed_bytes_avx512, pack_into_avx512}};
  TANDEM_ASSERT(static_cast<int>(isa) <= static_cast<int>(detect_isa()));
  switch (isa) {
    case Isa::Scalar: return kScalar;
    case Isa::Avx2: return kAvx2;
    case Isa::Avx512: return kAvx512;
    case Isa::Amx: return kAmx;
  }
  return kScalar;
}

std::vector<uint8_t> pack_for_level(const KernelTable& table, TensorView& weight) {
  std::vector<uint8_t> packed;
  if (table.packer.packable == nullptr || !table.packer.packable(weight)) return packed;
  packed.resize(static_cast<size_t>(table.packer.packed_bytes(weight)));
  table.packer.pack_into(weight, packed.data());
  weight.packed = packed.data();
  return packed;
}

std::string_view attention_arithmetic_name(AttentionArithmetic arithmetic) {
  switch (arithmetic) {
    case AttentionArithmetic::F32: return "f32";
    case AttentionArithmetic::Bf16: return "bf16";
    case AttentionArithmetic::Bf16Values: return "bf16-values";
  }
  return "?";
}

bool attention_arithmetic_available(Isa isa, AttentionArithmetic arithmetic) {
  return arithmetic == AttentionArithmetic::F32 ||
         (static_cast<int>(isa) >= static_cast<int>(Isa::Avx512) && cpu_has_avx512_bf16());
}

AttentionArithmetic active_attention_arithmetic() {
  static const AttentionArithmetic active = [] {
    const char* requested = std::getenv("TANDEM_ATTENTION");
    if (requested == nullptr) return AttentionArithmetic::F32;
    for (AttentionArithmetic candidate : {AttentionArithmetic::Bf16, AttentionArithmetic::Bf16Values})
      if (attention_arithmetic_name(candidate) == requested && attention_arithmetic_available(active_isa(), candidate))
        return candidate;
    return AttentionArithmetic::F32;
  }();
  return active;
}

const KernelTable& kernel_table(Isa isa, AttentionArithmetic arithmetic) {
  TANDEM_ASSERT(attention_arithmetic_available(isa, arithmetic));
  if (arithmetic == AttentionArithmetic::F32) return kernel_table(isa);
  // [level - Avx512][arithmetic - Bf16], built on first use (a level the CPU lacks is never built).
  static std::array<std::array<std::unique_ptr<KernelTable>, 2>, 2> tables;
  static std::mutex building;
  const std::lock_guard lock(building);
  auto& table = tables[static_cast<size_t>(static_cast<int>(isa) - static_cast<int>(Isa::Avx512))]
                      [static_cast<size_t>(static_cast<int>(arithmetic) - static_cast<int>(AttentionArithmetic::Bf16))];
  if (table == nullptr) table = std::make_unique<KernelTable>(with_bf16_attention(kernel_table(isa), arithmetic));
  return *table;
}

const KernelTable& kernel_table() {
  static const KernelTable& table = kernel_table(active_isa(), active_attention_arithmetic());
  return table;
}

}  // namespace tandem
