// Scalar row dot products for Q5_0, Q5_1, IQ4_NL and MXFP4 weights (see dot_q32.h). Per block:
//   Q5_0:   d_w d_x sum (q - 16) x          Q5_1:  d_w d_x sum q x + m_w d_x sum x
//   IQ4_NL: d_w d_x sum level(q) x          MXFP4: 2^(e-128) d_x sum level(q) x
// with the integer sums exact and the block terms added in order.
#include "kernels/dot_q32.h"

#include <type_traits>

#include "base/error.h"
#include "base/half.h"
#include "base/quant32.h"

namespace tandem {
namespace {

float dot_q5_0(const BlockQ5_0* w, const ActivationBlockQ8* x, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t block_sum = 0;
    for (int j = 0; j < 32; ++j) block_sum += (q5_code(w[b].nibbles, w[b].qh, j) - 16) * x[b].quants[j];
    sum += f16_to_f32(w[b].scale_f16) * x[b].scale * static_cast<float>(block_sum);
  }
  return sum;
}

float dot_q5_1(const BlockQ5_1* w, const ActivationBlockQ8* x, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t block_sum = 0, x_sum = 0;
    for (int j = 0; j < 32; ++j) {
      block_sum += q5_code(w[b].nibbles, w[b].qh, j) * x[b].quants[j];
      x_sum += x[b].quants[j];
    }
    sum += f16_to_f32(w[b].scale_f16) * x[b].scale * static_cast<float>(block_sum);
    sum += f16_to_f32(w[b].min_f16) * x[b].scale * static_cast<float>(x_sum);
  }
  return sum;
}

template <typename Block>
float dot_levels(const Block* w, const ActivationBlockQ8* x, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t block_sum = 0;
    float d;
    if constexpr (std::is_same_v<Block, BlockIQ4_NL>) {
      for (int j = 0; j < 32; ++j) block_sum += kIq4nlValues[nibble_code(w[b].nibbles, j)] * x[b].quants[j];
      d = f16_to_f32(w[b].scale_f16);
    } else {
      for (int j = 0; j < 32; ++j) block_sum += kMxfp4Values[nibble_code(w[b].nibbles, j)] * x[b].quants[j];
      d = mxfp4_half_scale(w[b].e);
    }
    sum += d * x[b].scale * static_cast<float>(block_sum);
  }
  return sum;
}

}  // namespace

float dot_q32_activations(DType type, const void* weight_row, const ActivationBlockQ8* x, int64_t n) {
  switch (type) {
    case DType::Q5_0: return dot_q5_0(static_cast<const BlockQ5_0*>(weight_row), x, n / 32);
    case DType::Q5_1: return dot_q5_1(static_cast<const BlockQ5_1*>(weight_row), x, n / 32);
    case DType::IQ4_NL: return dot_levels(static_cast<const BlockIQ4_NL*>(weight_row), x, n / 32);
    case DType::MXFP4: return dot_levels(static_cast<const BlockMXFP4*>(weight_row), x, n / 32);
    default: TANDEM_ASSERT(false && "dot_q32_activations: not a 32-element format");
  }
  return 0.0f;
}

}  // namespace tandem
