// One element of a weight (or KV) row stored in a block format, as a float: the per-block
// dequantisation the CUDA kernels run in registers, written once for host and device so that
// test_cuda holds THIS code against base/quant.h's reference (dequantize_row) on any machine,
// GPU or not. Layouts: base/dtype.h (Q8_0, Q4_0) and base/kquants.h (Q4_K, Q6_K). Only the
// arithmetic of a single element lives here; how kernels walk rows is theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "base/kquants.h"

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define TANDEM_HOST_DEVICE inline
#endif

namespace tandem::cuda {

TANDEM_HOST_DEVICE float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
#endif
}

// a * b and a - b rounded once each: nvcc contracts a * b - c into one fused multiply-add
// by default, which would round differently from the reference (GCC in ISO mode does not
// contract), so the device side spells the rounding out.
TANDEM_HOST_DEVICE float mul_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
TANDEM_HOST_DEVICE float sub_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

// IEEE half -> float, exactly (every half is a float); the bit layout of base/half.h's
// f16_to_f32, with the subnormals scaled by 2^-24 instead of normalised in a loop.
TANDEM_HOST_DEVICE float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // mantissa * 2^-24, exact
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  return float_from_bits(sign | ((exponent + 127 - 15) << 23) | (mantissa << 13));
}

TANDEM_HOST_DEVICE float bf16_bits_to_float(uint16_t b) { return float_from_bits(static_cast<uint32_t>(b) << 16); }

// Little-endian 16-bit load from bytes that may be only byte-aligned (BlockQ6K's d sits at
// an even offset, the others at the block start, but a row pointer is just bytes).
TANDEM_HOST_DEVICE uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

// Element k of a row stored as `type`. Blocks are addressed by byte offset (sizeof of the
// layout structs), so the same row pointer works on host and device.
template <DType type>
TANDEM_HOST_DEVICE float dequant_element(const uint8_t* row, int64_t k);

template <>
TANDEM_HOST_DEVICE float dequant_element<DType::F32>(const uint8_t* row, int64_t k) {
  uint32_t bits = static_cast<uint32_t>(row[4 * k]) | (static_cast<uint32_t>(row[4 * k + 1]) << 8) |
                  (static_cast<uint32_t>(row[4 * k + 2]) << 16) | (static_cast<uint32_t>(row[4 * k + 3]) << 24);
  return float_from_bits(bits);
}

template <>
TANDEM_HOST_DEVICE float dequant_element<DType::F16>(const uint8_t* row, int64_t k) {
  return f16_bits_to_float(load_u16(row + 2 * k));
}

template <>
TANDEM_HOST_DEVICE float dequant_element<DType::BF16>(const uint8_t* row, int64_t k) {
  return bf16_bits_to_float(load_u16(row + 2 * k));
}

// value = d * q (BlockQ8_0: 2-byte f16 scale, then 32 int8 quants).
template <>
TANDEM_HOST_DEVICE float dequant_element<DType::Q8_0>(const uint8_t* row, int64_t k) {
  const uint8_t* block = row + (k / 32) * static_cast<int64_t>(sizeof(BlockQ8_0));
  const float d = f16_bits_to_float(load_u16(block));
  return mul_rounded(d, static_cast<float>(static_cast<int8_t>(block[2 + k % 32])));
}

// value = d * (nibble - 8); element i < 16 is the low nibble of byte i, i + 16 its high one.
template <>
TANDEM_HOST_DEVICE float dequant_element<DType::Q4_0>(const uint8_t* row, int64_t k) {
  const uint8_t* block = row + (k / 32) * static_cast<int64_t>(sizeof(BlockQ4_0));
  const float d = f16_bits_to_float(load_u16(block));
  const int i = static_cast<int>(k % 32);
  const int nibble = i < 16 ? (block[2 + i] & 0x0f) : (block[2 + i - 16] >> 4);
  return mul_rounded(d, static_cast<float>(nibble - 8));
}

// Sub-block j's 6-bit scale and min from Q4_K's 12 packed bytes (base/kquants.h unpack_k4_scales).
TANDEM_HOST_DEVICE void q4k_scale_min(const uint8_t* packed, int j, int& scale, int& min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
    min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// value = (d * scale[j]) * q - dmin * min[j], in that order (the reference's); in each
// 64-element chunk c the low nibbles of qs[32c..32c+31] are elements 64c..64c+31, the high ones
// 64c+32..64c+63.
template <>
TANDEM_HOST_DEVICE float dequant_element<DType::Q4_K>(const uint8_t* row, int64_t k) {
  const uint8_t* block = row + (k / 256) * static_cast<int64_t>(sizeof(BlockQ4K));
  const int e = static_cast<int>(k % 256);
  const float d = f16_bits_to_float(load_u16(block + offsetof(BlockQ4K, d_f16)));
  const float dmin = f16_bits_to_float(load_u16(block + offsetof(BlockQ4K, dmin_f16)));
  int scale = 0, min = 0;
  q4k_scale_min(block + offsetof(BlockQ4K, scales), e / 32, scale, min);
  const uint8_t byte = block[offsetof(BlockQ4K, qs) + 32 * (e / 64) + e % 32];
  const int q = (e % 64) < 32 ? (byte & 0x0f) : (byte >> 4);
  const float dl = mul_rounded(d, static_cast<float>(scale));
  const float ml = mul_rounded(dmin, static_cast<float>(min));
  return sub_rounded(mul_rounded(dl, static_cast<float>(q)), ml);
}

// value = (d * scales[e / 16]) * (q - 32); q's low 4 bits from ql, its top 2 from qh, per
// 128-element half h and 32-element quarter (base/kquants.h BlockQ6K).
template <>
TANDEM_HOST_DEVICE float dequant_element<DType::Q6_K>(const uint8_t* row, int64_t k) {
  const uint8_t* block = row + (k / 256) * static_cast<int64_t>(sizeof(BlockQ6K));
  const int e = static_cast<int>(k % 256);
  const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
  const uint8_t* ql = block + offsetof(BlockQ6K, ql) + 64 * h;
  const uint8_t qh = block[offsetof(BlockQ6K, qh) + 32 * h + l];
  const uint8_t low_byte = ql[l + 32 * (quarter & 1)];
  const int low = quarter < 2 ? (low_byte & 0x0f) : (low_byte >> 4);
  const int q = (low | (((qh >> (2 * quarter)) & 3) << 4)) - 32;
  const float d = f16_bits_to_float(load_u16(block + offsetof(BlockQ6K, d_f16)));
  const int8_t scale = static_cast<int8_t>(block[offsetof(BlockQ6K, scales) + e / 16]);
  return mul_rounded(mul_rounded(d, static_cast<float>(scale)), static_cast<float>(q));
}

// Elements per block of the types the CUDA kernels take (rows must be whole blocks).
constexpr int64_t cuda_block_elements(DType type) {
  return type == DType::Q4_K || type == DType::Q6_K ? 256 : (type == DType::Q8_0 || type == DType::Q4_0 ? 32 : 1);
}

constexpr bool cuda_weight_type_supported(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0 ||
         type == DType::Q4_0 || type == DType::Q4_K || type == DType::Q6_K;
}

}  // namespace tandem::cuda
