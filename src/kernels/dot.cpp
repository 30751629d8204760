// The portable (scalar level) row dot products and activation quantizer (the AVX-512
// quantizer is kernels/avx512/quantize_avx512.cpp). Plain loops with a fixed number of independent partial sums, so the
// compiler can vectorize them for the baseline ISA without reassociating, and results do not depend on the batch. The
// faster levels have their own kernels (kernels/avx2, avx512, amx), picked through kernel_table(); the quantizer entry
// points below dispatch through it too.
#include "kernels/dot.h"

#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "kernels/cpu_features.h"
#include "kernels/dot_q32.h"
#include "kernels/kernel_table.h"

namespace tandem {
namespace {

constexpr int kLanes = 16;

inline float reduce_lanes(const float* lanes) {
  float sum = 0.0f;
  for (int i = 0; i < kLanes; ++i) sum += lanes[i];
  return sum;
}

float dot_f32_impl(const float* a, const float* b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[i + l] * b[i + l];
  for (int l = 0; i < n; ++i, ++l) lanes[l] += a[i] * b[i];
  return reduce_lanes(lanes);
}

float dot_f16_impl(const uint16_t* w, const float* x, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += f16_to_f32(w[i + l]) * x[i + l];
  for (int l = 0; i < n; ++i, ++l) lanes[l] += f16_to_f32(w[i]) * x[i];
  return reduce_lanes(lanes);
}

float dot_bf16_impl(const uint16_t* w, const float* x, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const uint32_t bits = static_cast<uint32_t>(w[i + l]) << 16;
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      lanes[l] += value * x[i + l];
    }
  for (int l = 0; i < n; ++i, ++l) lanes[l] += bf16_to_f32(w[i]) * x[i];
  return reduce_lanes(lanes);
}

float dot_q8_0_impl(const BlockQ8_0* w, const ActivationBlockQ8* x, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t block_sum = 0;
    for (int i = 0; i < 32; ++i) block_sum += static_cast<int32_t>(w[b].quants[i]) * x[b].quants[i];
    sum += f16_to_f32(w[b].scale_f16) * x[b].scale * static_cast<float>(block_sum);
  }
  return sum;
}

float dot_q4_0_impl(const BlockQ4_0* w, const ActivationBlockQ8* x, int64_t n_blocks) {
  float sum = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t block_sum = 0;
    for (int i = 0; i < 16; ++i) {
      block_sum += (static_cast<int32_t>(w[b].nibbles[i] & 0x0f) - 8) * x[b].quants[i];
      block_sum += (static_cast<int32_t>(w[b].nibbles[i] >> 4) - 8) * x[b].quants[i + 16];
    }
    sum += f16_to_f32(w[b].scale_f16) * x[b].scale * static_cast<float>(block_sum);
  }
  return sum;
}

}  // namespace

namespace portable {

void quantize_q8(const float* x, int64_t n, ActivationBlockQ8* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* block = x + b * 32;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(block[i]));
    const float scale = amax / 127.0f;
    const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
    out[b].scale = scale;
    for (int i = 0; i < 32; ++i) out[b].quants[i] = static_cast<int8_t>(std::nearbyint(block[i] * inverse));
  }
}

}  // namespace portable

void quantize_activations_q8_isa(Isa isa, const float* x, int64_t n, ActivationBlockQ8* out) {
  kernel_table(isa).quantize_q8(x, n, out);
}

void quantize_activations_q8(const float* x, int64_t n, ActivationBlockQ8* out) {
  kernel_table().quantize_q8(x, n, out);
}

float dot_float_activations(DType type, const void* weight_row, const float* x, int64_t n) {
  switch (type) {
    case DType::F32: return dot_f32_impl(static_cast<const float*>(weight_row), x, n);
    case DType::F16: return dot_f16_impl(static_cast<const uint16_t*>(weight_row), x, n);
    case DType::BF16: return dot_bf16_impl(static_cast<const uint16_t*>(weight_row), x, n);
    default: TANDEM_ASSERT(false && "dot_float_activations: unsupported type");
  }
  return 0.0f;
}

float dot_q8_activations(DType type, const void* weight_row, const ActivationBlockQ8* x, int64_t n) {
  switch (type) {
    case DType::Q8_0: return dot_q8_0_impl(static_cast<const BlockQ8_0*>(weight_row), x, n / 32);
    case DType::Q4_0: return dot_q4_0_impl(static_cast<const BlockQ4_0*>(weight_row), x, n / 32);
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::MXFP4: return dot_q32_activations(type, weight_row, x, n);
    default: TANDEM_ASSERT(false && "dot_q8_activations: unsupported type");
  }
  return 0.0f;
}

float dot_f32(const float* a, const float* b, int64_t n) { return dot_f32_impl(a, b, n); }

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace tandem
