// One element of a weight (or KV) row stored in a block format, as a float: the per-block
// dequantisation the CUDA kernels run in registers, written once for host and device so that
// test_cuda holds THIS code against base/quant.h's reference (dequantize_row) on any machine,
// GPU or not. Layouts: base/dtype.h (Q8_0, Q4_0) and base/kquants.h (Q4_K, Q6_K). Only the
// arithmetic of a single element lives here; how kernels walk rows is theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

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

// A naturally aligned word of a row: one load instruction on the device (16 bytes for
// Words4), memcpy on the host.
struct alignas(16) Words4 {
  uint32_t w[4];
};
template <typename T>
TANDEM_HOST_DEVICE T load_aligned(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const T*>(p);
#else
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
#endif
}

// Eight bytes at a 2-aligned address, as four 16-bit loads; byte j of the result is p[j].
TANDEM_HOST_DEVICE void load8_u16(const uint8_t* p, uint8_t bytes[8]) {
  for (int i = 0; i < 4; ++i) {
    const uint16_t half = load_aligned<uint16_t>(p + 2 * i);
    bytes[2 * i] = static_cast<uint8_t>(half & 0xffu);
    bytes[2 * i + 1] = static_cast<uint8_t>(half >> 8);
  }
}

// Elements c..c+7 of a row (c a multiple of 8), the same floats as dequant_element gives
// them, with a few wide loads instead of a byte or two per element: the decode GEMV's inner
// step (matmul.cu). Alignment: F16/BF16 rows 16-byte aligned, Q4_K rows 4-byte aligned, the
// others 2-byte aligned (every row of a cudaMalloc'd matrix of whole blocks is).
template <DType type>
TANDEM_HOST_DEVICE void dequant_group(const uint8_t* row, int64_t c, float w[8]);

template <>
TANDEM_HOST_DEVICE void dequant_group<DType::F16>(const uint8_t* row, int64_t c, float w[8]) {
  const Words4 packed = load_aligned<Words4>(row + 2 * c);
  for (int i = 0; i < 4; ++i) {  // little-endian: element 2i in the low half of word i
    w[2 * i] = f16_bits_to_float(static_cast<uint16_t>(packed.w[i] & 0xffffu));
    w[2 * i + 1] = f16_bits_to_float(static_cast<uint16_t>(packed.w[i] >> 16));
  }
}

template <>
TANDEM_HOST_DEVICE void dequant_group<DType::BF16>(const uint8_t* row, int64_t c, float w[8]) {
  const Words4 packed = load_aligned<Words4>(row + 2 * c);
  for (int i = 0; i < 4; ++i) {
    w[2 * i] = bf16_bits_to_float(static_cast<uint16_t>(packed.w[i] & 0xffffu));
    w[2 * i + 1] = bf16_bits_to_float(static_cast<uint16_t>(packed.w[i] >> 16));
  }
}

// A quarter of a Q8_0 block: the scale, then quants 8q..8q+7 (q = (c % 32) / 8).
template <>
TANDEM_HOST_DEVICE void dequant_group<DType::Q8_0>(const uint8_t* row, int64_t c, float w[8]) {
  const uint8_t* block = row + (c / 32) * static_cast<int64_t>(sizeof(BlockQ8_0));
  const float d = f16_bits_to_float(load_aligned<uint16_t>(block));
  uint8_t bytes[8];
  load8_u16(block + 2 + c % 32, bytes);
  for (int j = 0; j < 8; ++j) w[j] = mul_rounded(d, static_cast<float>(static_cast<int8_t>(bytes[j])));
}

// Elements i0..i0+7 of a Q4_0 block: the low nibbles of bytes i0.. when i0 < 16, else the
// high nibbles of bytes i0-16...
template <>
TANDEM_HOST_DEVICE void dequant_group<DType::Q4_0>(const uint8_t* row, int64_t c, float w[8]) {
  const uint8_t* block = row + (c / 32) * static_cast<int64_t>(sizeof(BlockQ4_0));
  const float d = f16_bits_to_float(load_aligned<uint16_t>(block));
  const int i0 = static_cast<int>(c % 32);
  uint8_t bytes[8];
  load8_u16(block + 2 + (i0 % 16), bytes);
  for (int j = 0; j < 8; ++j) {
    const int nibble = i0 < 16 ? (bytes[j] & 0x0f) : (bytes[j] >> 4);
    w[j] = mul_rounded(d, static_cast<float>(nibble - 8));
  }
}

// Eight elements of one Q4_K sub-block (one scale and min), eight consecutive bytes of qs.
template <>
TANDEM_HOST_DEVICE void dequant_group<DType::Q4_K>(const uint8_t* row, int64_t c, float w[8]) {
  const uint8_t* block = row + (c / 256) * static_cast<int64_t>(sizeof(BlockQ4K));
  const int e = static_cast<int>(c % 256);
  const float d = f16_bits_to_float(load_aligned<uint16_t>(block + offsetof(BlockQ4K, d_f16)));
  const float dmin = f16_bits_to_float(load_aligned<uint16_t>(block + offsetof(BlockQ4K, dmin_f16)));
  int scale = 0, min = 0;
  q4k_scale_min(block + offsetof(BlockQ4K, scales), e / 32, scale, min);
  const float dl = mul_rounded(d, static_cast<float>(scale));
  const float ml = mul_rounded(dmin, static_cast<float>(min));
  const uint8_t* qs = block + offsetof(BlockQ4K, qs) + 32 * (e / 64) + e % 32;  // 8-byte aligned in the block
  const uint32_t words[2] = {load_aligned<uint32_t>(qs), load_aligned<uint32_t>(qs + 4)};
  const bool low = (e % 64) < 32;
  for (int j = 0; j < 8; ++j) {
    const uint32_t byte = (words[j / 4] >> (8 * (j % 4))) & 0xffu;
    const int q = static_cast<int>(low ? (byte & 0x0fu) : (byte >> 4));
    w[j] = sub_rounded(mul_rounded(dl, static_cast<float>(q)), ml);
  }
}

// Eight elements of one Q6_K 16-element scale group: eight consecutive bytes of ql and of qh.
template <>
TANDEM_HOST_DEVICE void dequant_group<DType::Q6_K>(const uint8_t* row, int64_t c, float w[8]) {
  const uint8_t* block = row + (c / 256) * static_cast<int64_t>(sizeof(BlockQ6K));
  const int e = static_cast<int>(c % 256);
  const int h = e / 128, quarter = (e % 128) / 32, l = e % 32;
  uint8_t low_bytes[8], high_bytes[8];
  load8_u16(block + offsetof(BlockQ6K, ql) + 64 * h + l + 32 * (quarter & 1), low_bytes);
  load8_u16(block + offsetof(BlockQ6K, qh) + 32 * h + l, high_bytes);
  const float d = f16_bits_to_float(load_aligned<uint16_t>(block + offsetof(BlockQ6K, d_f16)));
  const int8_t scale = static_cast<int8_t>(block[offsetof(BlockQ6K, scales) + e / 16]);
  const float ds = mul_rounded(d, static_cast<float>(scale));
  for (int j = 0; j < 8; ++j) {
    const int low = quarter < 2 ? (low_bytes[j] & 0x0f) : (low_bytes[j] >> 4);
    const int q = (low | (((high_bytes[j] >> (2 * quarter)) & 3) << 4)) - 32;
    w[j] = mul_rounded(ds, static_cast<float>(q));
  }
}

// The split layout of Q8_0 and Q4_0 matrices on the device: a row's quants contiguous (Q8_0:
// n_cols int8; Q4_0: n_cols / 2 bytes, each block's 16 nibble bytes as in the block), all the
// rows' quants first, then every row's block scales (f16 bits, [n_rows, n_cols / 32]). The
// blocks' 34- and 18-byte strides leave their quants only 2-byte aligned; split, a group of
// 8 elements is one 8-byte load and a scale. Same values, same arithmetic.
constexpr bool cuda_split_layout(DType type) { return type == DType::Q8_0 || type == DType::Q4_0; }
constexpr int64_t cuda_split_quant_row_bytes(DType type, int64_t n_cols) {
  return type == DType::Q8_0 ? n_cols : n_cols / 2;
}

// File rows ([n_rows] blocks of a cuda_split_layout type) to the split layout: quants at 0,
// scales from *scales_offset (16-byte aligned).
inline std::vector<uint8_t> split_block_rows(DType type, const uint8_t* rows, int64_t n_rows, int64_t n_cols,
                                             int64_t* scales_offset) {
  const int64_t n_blocks = n_cols / 32, quant_row_bytes = cuda_split_quant_row_bytes(type, n_cols);
  const int64_t block_bytes = type == DType::Q8_0 ? 34 : 18, quant_bytes = block_bytes - 2;
  *scales_offset = (n_rows * quant_row_bytes + 15) / 16 * 16;
  std::vector<uint8_t> split(static_cast<size_t>(*scales_offset + n_rows * n_blocks * 2));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* block = rows + (r * n_blocks + b) * block_bytes;
      std::memcpy(split.data() + r * quant_row_bytes + b * quant_bytes, block + 2, static_cast<size_t>(quant_bytes));
      std::memcpy(split.data() + *scales_offset + (r * n_blocks + b) * 2, block, 2);
    }
  }
  return split;
}

// dequant_group over the split layout: quants is the row's quants, scales its block scales.
template <DType type>
TANDEM_HOST_DEVICE void dequant_group_split(const uint8_t* quants, const uint16_t* scales, int64_t c, float w[8]);

template <>
TANDEM_HOST_DEVICE void dequant_group_split<DType::Q8_0>(const uint8_t* quants, const uint16_t* scales, int64_t c,
                                                         float w[8]) {
  const float d = f16_bits_to_float(scales[c / 32]);
  const uint64_t packed = load_aligned<uint64_t>(quants + c);
  for (int j = 0; j < 8; ++j)
    w[j] = mul_rounded(d, static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(packed >> (8 * j)))));
}

template <>
TANDEM_HOST_DEVICE void dequant_group_split<DType::Q4_0>(const uint8_t* quants, const uint16_t* scales, int64_t c,
                                                         float w[8]) {
  const float d = f16_bits_to_float(scales[c / 32]);
  const int i0 = static_cast<int>(c % 32);
  const uint64_t packed = load_aligned<uint64_t>(quants + (c / 32) * 16 + i0 % 16);
  for (int j = 0; j < 8; ++j) {
    const auto byte = static_cast<uint8_t>(packed >> (8 * j));
    const int nibble = i0 < 16 ? (byte & 0x0f) : (byte >> 4);
    w[j] = mul_rounded(d, static_cast<float>(nibble - 8));
  }
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
