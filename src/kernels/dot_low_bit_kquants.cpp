// The scalar reference row dot kernels of Q2_K, Q3_K and IQ4_XS. The levels' variants
// (kernels/avx2/kquant_rows_avx2.cpp: maddubs/madd; kernels/avx512/kquant_rows_avx512.cpp:
// maddubs/vpdpwssd for Q2_K and Q3_K, vpdpbusd for IQ4_XS) compute the same exact int32 sums
// per 256-element block (the sub-block scales applied in integers) and then the shared float
// update of kquant_dot_common.h, so all of them return identical bits.
#include "kernels/dot_low_bit_kquants.h"

#include <cstring>

#include "base/half.h"
#include "base/kquants.h"
#include "base/kquants_low_bit.h"
#include "kernels/kquant_dot_common.h"

namespace tandem {
namespace {

using kquant_detail::finish_d;
using kquant_detail::finish_k4;
using kquant_detail::iq4xs_scales;

// ---- Scalar reference ------------------------------------------------------------------

float dot_q2k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ2K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t q[256];
    unpack_q2k_quants(w[b], q);
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t sub = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sub += q[i] * x[b].quants[i];
      sumi += (w[b].scales[j] & 0x0f) * sub;
      summ += (w[b].scales[j] >> 4) * x[b].block_sums[j];
    }
    acc += finish_k4(x[b].scale, f16_to_f32(w[b].d_f16), f16_to_f32(w[b].dmin_f16), sumi, summ);
  }
  return acc;
}

float dot_q3k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ3K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int8_t q[256], scales[16];
    unpack_q3k_quants(w[b], q);
    unpack_q3k_scales(w[b].scales, scales);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t sub = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sub += q[i] * x[b].quants[i];
      sumi += scales[j] * sub;
    }
    acc += finish_d(x[b].scale, f16_to_f32(w[b].d_f16), sumi);
  }
  return acc;
}

float dot_iq4xs_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockIQ4XS*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int8_t scales[8];
    unpack_iq4xs_scales(w[b], scales);
    int32_t sumi = 0;
    for (int j = 0; j < 8; ++j) {
      const uint8_t* qs = w[b].qs + 16 * j;
      const int8_t* a = x[b].quants + 32 * j;
      int32_t sub = 0;
      for (int i = 0; i < 16; ++i) sub += kIq4NonLinear[qs[i] & 0x0f] * a[i] + kIq4NonLinear[qs[i] >> 4] * a[16 + i];
      sumi += scales[j] * sub;
    }
    acc += finish_d(x[b].scale, f16_to_f32(w[b].d_f16), sumi);
  }
  return acc;
}

}  // namespace

KQuantRowDotFn low_bit_kquant_row_dot_scalar(DType type) {
  switch (type) {
    case DType::Q2_K: return dot_q2k_scalar;
    case DType::Q3_K: return dot_q3k_scalar;
    case DType::IQ4_XS: return dot_iq4xs_scalar;
    default: return nullptr;
  }
}

}  // namespace tandem
