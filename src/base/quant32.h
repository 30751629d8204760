// The other 32-element block formats GGUF files carry — Q5_0, Q5_1, IQ4_NL and MXFP4 — laid
// out byte for byte as the GGUF specification (ggml) stores them, their codebooks, and the
// reference (scalar) quantizers and dequantizers. Every format keeps ggml's nibble order:
// byte j of the nibbles holds element j in its low nibble and element j + 16 in its high one.
// Kernels that compute on the blocks live in kernels/ (dot_q32, the levels' gemm_q32); this
// file owns only the format.
#pragma once

#include <bit>
#include <cstdint>

namespace tandem {

constexpr int64_t kQ32BlockSize = 32;

// value = d * (q - 16), q in [0, 31]: the low 4 bits in the nibbles, bit 4 of element j in bit
// j of qh (a little-endian uint32, so element j's bit is bit j % 8 of byte j / 8).
struct BlockQ5_0 {
  uint16_t scale_f16;   // d
  uint8_t qh[4];        // fifth bits
  uint8_t nibbles[16];  // low 4 bits
};
static_assert(sizeof(BlockQ5_0) == 22);

// value = d * q + m, q in [0, 31], bits as Q5_0.
struct BlockQ5_1 {
  uint16_t scale_f16;  // d
  uint16_t min_f16;    // m
  uint8_t qh[4];
  uint8_t nibbles[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

// value = d * kIq4nlValues[nibble]: 16 non-linear levels, denser near zero.
struct BlockIQ4_NL {
  uint16_t scale_f16;  // d
  uint8_t nibbles[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// OCP microscaling FP4: value = fp4(nibble) * 2^(e - 127), fp4 an E2M1 float (bit 3 the sign,
// magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6). ggml keeps the magnitudes doubled as integers
// (kMxfp4Values) and halves the scale to match: value = kMxfp4Values[nibble] * 2^(e - 128).
struct BlockMXFP4 {
  uint8_t e;  // e8m0 shared exponent
  uint8_t nibbles[16];
};
static_assert(sizeof(BlockMXFP4) == 17);
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as a float, exact for every e (e < 2 gives the subnormals 2^-128 and 2^-127).
inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// Element j's 5-bit code of a Q5_0/Q5_1 block: low nibble or high nibble, plus the qh bit.
inline int q5_code(const uint8_t nibbles[16], const uint8_t qh[4], int j) {
  const int low4 = j < 16 ? nibbles[j] & 0x0f : nibbles[j - 16] >> 4;
  return low4 | (((qh[j / 8] >> (j % 8)) & 1) << 4);
}
// Element j's 4-bit code of an IQ4_NL/MXFP4 block.
inline int nibble_code(const uint8_t nibbles[16], int j) { return j < 16 ? nibbles[j] & 0x0f : nibbles[j - 16] >> 4; }

// Reference quantizers (n a multiple of 32) and dequantizers.
void quantize_row_q5_0(const float* x, BlockQ5_0* out, int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* out, int64_t n);
void quantize_row_iq4_nl(const float* x, BlockIQ4_NL* out, int64_t n);
void quantize_row_mxfp4(const float* x, BlockMXFP4* out, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* blocks, float* out, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* blocks, float* out, int64_t n);
void dequantize_row_iq4_nl(const BlockIQ4_NL* blocks, float* out, int64_t n);
void dequantize_row_mxfp4(const BlockMXFP4* blocks, float* out, int64_t n);

}  // namespace tandem
