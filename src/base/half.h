// Conversions between float and the 16-bit float formats stored in model files:
// IEEE half (F16) and bfloat16 (BF16). Round-to-nearest-even on the way down.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace tandem {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal half: normalise it
      exponent = 127 - 15 + 1;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      bits = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  return std::bit_cast<float>(bits);
}

inline uint16_t f32_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u)  // inf or nan
    return sign | 0x7c00u | (abs_bits > 0x7f800000u ? 0x200u : 0u);
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // rounds past the largest half
  if (abs_bits < 0x38800000u) {                        // result is subnormal or zero
    // Add 0.5 (as a float with the right exponent) so the FPU rounds the mantissa for us.
    const float magic = std::bit_cast<float>(0x3f000000u);  // 0.5
    float shifted = std::bit_cast<float>(abs_bits) + magic;
    return sign | static_cast<uint16_t>(std::bit_cast<uint32_t>(shifted) - 0x3f000000u);
  }
  uint32_t mantissa_odd = (abs_bits >> 13) & 1u;
  uint32_t rounded = abs_bits + 0xc8000fffu + mantissa_odd;  // rebias exponent, round to even
  return sign | static_cast<uint16_t>(rounded >> 13);
}

inline float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t f32_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace tandem
