// K-quant block layouts (Q4_K, Q5_K, Q6_K, Q8_K; 256 elements per super-block) as the GGUF
// specification lays them out byte for byte, so files written by llama.cpp decode identically,
// plus the reference (scalar) quantizers and dequantizers. Kernels that compute on the blocks
// directly live in kernels/dot_kquants; this file owns only the format.
#pragma once

#include <cstdint>

namespace tandem {

constexpr int64_t kKQuantBlockSize = 256;

// 8 sub-blocks of 32: value = d * scale[j] * q - dmin * min[j], q in [0, 15]; scale[j] and
// min[j] are 6-bit, packed into `scales` (see unpack_k4_scales). In each 64-element chunk c
// (32 bytes of qs), the low nibbles hold elements 64c..64c+31, the high nibbles 64c+32..64c+63.
struct BlockQ4K {
  uint16_t d_f16;
  uint16_t dmin_f16;
  uint8_t scales[12];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4K) == 144);

// As Q4_K with a fifth bit: q in [0, 31]; bit 4 of element 64c+l (l < 32) is bit 2c of qh[l],
// of element 64c+32+l bit 2c+1 of qh[l].
struct BlockQ5K {
  uint16_t d_f16;
  uint16_t dmin_f16;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ5K) == 176);

// 16 sub-blocks of 16: value = d * scales[j] * (q - 32), q in [0, 63], scales int8. In each
// 128-element half h (64 bytes of ql, 32 of qh), for l < 32: element 128h+l is the low nibble
// of ql[l] with bits 0-1 of qh[l], 128h+32+l low nibble of ql[32+l] with bits 2-3,
// 128h+64+l high nibble of ql[l] with bits 4-5, 128h+96+l high nibble of ql[32+l] with 6-7.
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d_f16;
};
static_assert(sizeof(BlockQ6K) == 210);

// value = d * q; bsums[j] is the sum of the 16 quants of sub-block j (a float d, not f16).
struct BlockQ8K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8K) == 292);

// The 12-byte scale field of Q4_K/Q5_K: for j < 4, scale = bytes[j] & 63 and
// min = bytes[j+4] & 63; for j >= 4, the low 4 bits are in bytes[j+4] (scale low nibble,
// min high nibble) and the top 2 bits in bits 6-7 of bytes[j-4] (scale) and bytes[j] (min).
void unpack_k4_scales(const uint8_t packed[12], uint8_t scales[8], uint8_t mins[8]);
void pack_k4_scales(const uint8_t scales[8], const uint8_t mins[8], uint8_t packed[12]);

// Integer quants of one block in element order (the scalar kernels and tests use them).
void unpack_q4k_quants(const BlockQ4K& block, uint8_t q[256]);  // [0, 15]
void unpack_q5k_quants(const BlockQ5K& block, uint8_t q[256]);  // [0, 31]
void unpack_q6k_quants(const BlockQ6K& block, int8_t q[256]);   // [-32, 31]

// The sub-block fit the Q4_K/Q5_K quantizers use, for the other asymmetric k-quants (Q2_K):
// x ~ scale * q - min with q in [0, nmax] and min >= 0, least squared error over a few ranges.
struct KQuantScaleMin {
  float scale;
  float min;
};
KQuantScaleMin fit_scale_min(const float* x, int n, int nmax);

// n floats -> n/256 blocks (n a multiple of 256), and back.
void quantize_row_q4k(const float* x, BlockQ4K* out, int64_t n);
void quantize_row_q5k(const float* x, BlockQ5K* out, int64_t n);
void quantize_row_q6k(const float* x, BlockQ6K* out, int64_t n);
void quantize_row_q8k(const float* x, BlockQ8K* out, int64_t n);
void dequantize_row_q4k(const BlockQ4K* blocks, float* y, int64_t n);
void dequantize_row_q5k(const BlockQ5K* blocks, float* y, int64_t n);
void dequantize_row_q6k(const BlockQ6K* blocks, float* y, int64_t n);
void dequantize_row_q8k(const BlockQ8K* blocks, float* y, int64_t n);

}  // namespace tandem
