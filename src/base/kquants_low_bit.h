// The 256-element weight blocks below 4 bits a weight (Q2_K, Q3_K) and the non-linear
// IQ4_XS, byte for byte as GGUF stores them, with their reference quantizers and
// dequantizers. Like base/kquants.h this owns only the format; the kernels that compute on
// the blocks directly are in kernels/dot_low_bit_kquants.cpp.
#pragma once

#include <cstdint>

#include "base/quant32.h"

namespace tandem {

// 16 sub-blocks of 16: value = d * scale[j] * q - dmin * min[j], q in [0, 3]; scales[j] holds
// scale[j] in its low nibble and min[j] in its high nibble. In each 128-element half h (32
// bytes of qs), element 128h + 32k + l (k < 4, l < 32) is bits 2k..2k+1 of qs[32h + l].
struct BlockQ2K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d_f16;
  uint16_t dmin_f16;
};
static_assert(sizeof(BlockQ2K) == 84);

// 16 sub-blocks of 16: value = d * scale[j] * q, q in [-4, 3], scale[j] in [-32, 31] stored
// as a 6-bit scale[j] + 32 (see unpack_q3k_scales). The low two bits of q + 4 lie as in Q2_K's
// qs; its bit 2 for element 128h + 32k + l is bit 4h + k of hmask[l] (set: q = low bits,
// clear: q = low bits - 4).
struct BlockQ3K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d_f16;
};
static_assert(sizeof(BlockQ3K) == 110);

// 8 sub-blocks of 32: value = d * (ls[j] - 32) * kIq4NonLinear[index], ls 6-bit: low 4 bits
// in nibble j % 2 of scales_l[j / 2], top 2 bits in bits 2j..2j+1 of scales_h. Sub-block j's
// indices are 16 bytes at qs + 16j: element i < 16 the low nibble of byte i, 16 + i the high.
struct BlockIQ4XS {
  uint16_t d_f16;
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockIQ4XS) == 136);

// The 16 levels an IQ4 index stands for (the GGUF format fixes them): denser near zero, where
// most weights lie, and one more step on the negative side.
// IQ4_XS shares IQ4_NL's 16 levels (base/quant32.h).
inline constexpr const int8_t (&kIq4NonLinear)[16] = kIq4nlValues;

// Integer quants and scales in element / sub-block order (scalar kernels and tests use them).
void unpack_q2k_quants(const BlockQ2K& block, uint8_t q[256]);        // [0, 3]
void unpack_q3k_quants(const BlockQ3K& block, int8_t q[256]);         // [-4, 3]
void unpack_q3k_scales(const uint8_t packed[12], int8_t scales[16]);  // [-32, 31]
// The 12 scale bytes of Q3_K from the 6-bit values scale + 32: for j < 8 the low 4 bits are
// the low nibble of byte j, for j >= 8 the high nibble of byte j - 8; the top 2 bits are bits
// 2 (j / 4)..2 (j / 4) + 1 of byte 8 + j % 4.
void pack_q3k_scales(const int8_t scales[16], uint8_t packed[12]);
void unpack_iq4xs_scales(const BlockIQ4XS& block, int8_t scales[8]);  // ls - 32, [-32, 31]

// n floats -> n/256 blocks (n a multiple of 256), and back.
void quantize_row_q2k(const float* x, BlockQ2K* out, int64_t n);
void quantize_row_q3k(const float* x, BlockQ3K* out, int64_t n);
void quantize_row_iq4xs(const float* x, BlockIQ4XS* out, int64_t n);
void dequantize_row_q2k(const BlockQ2K* blocks, float* y, int64_t n);
void dequantize_row_q3k(const BlockQ3K* blocks, float* y, int64_t n);
void dequantize_row_iq4xs(const BlockIQ4XS* blocks, float* y, int64_t n);

}  // namespace tandem
