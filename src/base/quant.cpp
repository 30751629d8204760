// Reference quantizers follow the GGUF block layouts in base/dtype.h:
//   Q8_0: d = max|x| / 127, q = round(x / d).
//   Q4_0: d = m / -8 where m is the element of largest magnitude (sign kept), so m maps to
//         nibble 0 exactly; q = clamp(trunc(x / d + 8.5), 0, 15).
//   K-quants (Q4_K, Q5_K, Q6_K, Q8_K) live in base/kquants.cpp, Q2_K, Q3_K and IQ4_XS in
//   base/kquants_low_bit.cpp, Q5_0, Q5_1, IQ4_NL and MXFP4 in base/quant32.cpp; this file only
//   routes to them.
#include "base/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "base/kquants.h"
#include "base/kquants_low_bit.h"
#include "base/quant32.h"

namespace tandem {

bool dtype_is_computable(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0 ||
         type == DType::Q4_0 || type == DType::Q4_K || type == DType::Q5_K || type == DType::Q6_K ||
         type == DType::Q8_K || type == DType::Q5_0 || type == DType::Q5_1 || type == DType::IQ4_NL ||
         type == DType::MXFP4 || type == DType::Q2_K || type == DType::Q3_K || type == DType::IQ4_XS;
}

namespace {

void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const float* x = src + b * kQ8_0BlockSize;
    float amax = 0.0f;
    for (int i = 0; i < kQ8_0BlockSize; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].scale_f16 = f32_to_f16(d);
    for (int i = 0; i < kQ8_0BlockSize; ++i) dst[b].quants[i] = static_cast<int8_t>(std::lround(x[i] * inverse));
  }
}

void quantize_q4_0(const float* src, BlockQ4_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
    const float* x = src + b * kQ4_0BlockSize;
    float amax = 0.0f, extreme = 0.0f;
    for (int i = 0; i < kQ4_0BlockSize; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        extreme = x[i];
      }
    }
    const float d = extreme / -8.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].scale_f16 = f32_to_f16(d);
    auto nibble = [&](float v) { return static_cast<uint8_t>(std::min(15, static_cast<int>(v * inverse + 8.5f))); };
    for (int i = 0; i < kQ4_0BlockSize / 2; ++i)
      dst[b].nibbles[i] = static_cast<uint8_t>(nibble(x[i]) | (nibble(x[i + 16]) << 4));
  }
}

}  // namespace

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(src[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(src[i]);
      return;
    case DType::Q8_0:
      TANDEM_ASSERT(n % kQ8_0BlockSize == 0);
      quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
      return;
    case DType::Q4_0:
      TANDEM_ASSERT(n % kQ4_0BlockSize == 0);
      quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
      return;
    case DType::Q4_K: quantize_row_q4k(src, static_cast<BlockQ4K*>(dst), n); return;
    case DType::Q5_K: quantize_row_q5k(src, static_cast<BlockQ5K*>(dst), n); return;
    case DType::Q6_K: quantize_row_q6k(src, static_cast<BlockQ6K*>(dst), n); return;
    case DType::Q8_K: quantize_row_q8k(src, static_cast<BlockQ8K*>(dst), n); return;
    case DType::Q5_0: quantize_row_q5_0(src, static_cast<BlockQ5_0*>(dst), n); return;
    case DType::Q5_1: quantize_row_q5_1(src, static_cast<BlockQ5_1*>(dst), n); return;
    case DType::IQ4_NL: quantize_row_iq4_nl(src, static_cast<BlockIQ4_NL*>(dst), n); return;
    case DType::MXFP4: quantize_row_mxfp4(src, static_cast<BlockMXFP4*>(dst), n); return;
    case DType::Q2_K: quantize_row_q2k(src, static_cast<BlockQ2K*>(dst), n); return;
    case DType::Q3_K: quantize_row_q3k(src, static_cast<BlockQ3K*>(dst), n); return;
    case DType::IQ4_XS: quantize_row_iq4xs(src, static_cast<BlockIQ4XS*>(dst), n); return;
    default: TANDEM_ASSERT(false && "quantize_row: unsupported type");
  }
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      return;
    case DType::Q8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(src);
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const float d = f16_to_f32(blocks[b].scale_f16);
        for (int i = 0; i < kQ8_0BlockSize; ++i) dst[b * kQ8_0BlockSize + i] = d * blocks[b].quants[i];
      }
      return;
    }
    case DType::Q4_0: {
      const auto* blocks = static_cast<const BlockQ4_0*>(src);
      for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
        const float d = f16_to_f32(blocks[b].scale_f16);
        float* out = dst + b * kQ4_0BlockSize;
        for (int i = 0; i < kQ4_0BlockSize / 2; ++i) {
          out[i] = d * (static_cast<int>(blocks[b].nibbles[i] & 0x0f) - 8);
          out[i + 16] = d * (static_cast<int>(blocks[b].nibbles[i] >> 4) - 8);
        }
      }
      return;
    }
    case DType::Q4_K: dequantize_row_q4k(static_cast<const BlockQ4K*>(src), dst, n); return;
    case DType::Q5_K: dequantize_row_q5k(static_cast<const BlockQ5K*>(src), dst, n); return;
    case DType::Q6_K: dequantize_row_q6k(static_cast<const BlockQ6K*>(src), dst, n); return;
    case DType::Q8_K: dequantize_row_q8k(static_cast<const BlockQ8K*>(src), dst, n); return;
    case DType::Q5_0: dequantize_row_q5_0(static_cast<const BlockQ5_0*>(src), dst, n); return;
    case DType::Q5_1: dequantize_row_q5_1(static_cast<const BlockQ5_1*>(src), dst, n); return;
    case DType::IQ4_NL: dequantize_row_iq4_nl(static_cast<const BlockIQ4_NL*>(src), dst, n); return;
    case DType::MXFP4: dequantize_row_mxfp4(static_cast<const BlockMXFP4*>(src), dst, n); return;
    case DType::Q2_K: dequantize_row_q2k(static_cast<const BlockQ2K*>(src), dst, n); return;
    case DType::Q3_K: dequantize_row_q3k(static_cast<const BlockQ3K*>(src), dst, n); return;
    case DType::IQ4_XS: dequantize_row_iq4xs(static_cast<const BlockIQ4XS*>(src), dst, n); return;
    default: TANDEM_ASSERT(false && "dequantize_row: unsupported type");
  }
}

}  // namespace tandem
