// Packing the 32-element block formats into the shared 16-row VNNI layout (see q8_layout.h).
#include "kernels/packed/q8_layout.h"

#include <cstring>

#include "base/dtype.h"
#include "base/error.h"
#include "base/quant32.h"
#include "kernels/packed/row_groups.h"

namespace tandem::packed {

namespace {

// Element k (0..31) of a row's block b as the layout stores it: Q8_0's int8 as a byte, the
// other formats' unsigned code (Q4_0's nibble is q + 8; Q5's five bits; IQ4_NL's and
// MXFP4's level index).
inline uint8_t block_code(DType type, const uint8_t* row, int64_t b, int k) {
  switch (type) {
    case DType::Q8_0: return static_cast<uint8_t>(reinterpret_cast<const BlockQ8_0*>(row)[b].quants[k]);
    case DType::Q4_0: return static_cast<uint8_t>(nibble_code(reinterpret_cast<const BlockQ4_0*>(row)[b].nibbles, k));
    case DType::Q5_0: {
      const BlockQ5_0& block = reinterpret_cast<const BlockQ5_0*>(row)[b];
      return static_cast<uint8_t>(q5_code(block.nibbles, block.qh, k));
    }
    case DType::Q5_1: {
      const BlockQ5_1& block = reinterpret_cast<const BlockQ5_1*>(row)[b];
      return static_cast<uint8_t>(q5_code(block.nibbles, block.qh, k));
    }
    case DType::IQ4_NL:
      return static_cast<uint8_t>(nibble_code(reinterpret_cast<const BlockIQ4_NL*>(row)[b].nibbles, k));
    case DType::MXFP4: return static_cast<uint8_t>(nibble_code(reinterpret_cast<const BlockMXFP4*>(row)[b].nibbles, k));
    default: __builtin_trap();
  }
}

// Row n's block b scale field(s) into the group-block's scale area: fp16 d (and Q5_1's m
// 32 bytes on), or MXFP4's exponent byte.
void copy_block_scale(DType type, const uint8_t* row, int64_t b, int64_t n, uint8_t* scales) {
  switch (type) {
    case DType::Q8_0: std::memcpy(scales + 2 * n, &reinterpret_cast<const BlockQ8_0*>(row)[b].scale_f16, 2); return;
    case DType::Q4_0: std::memcpy(scales + 2 * n, &reinterpret_cast<const BlockQ4_0*>(row)[b].scale_f16, 2); return;
    case DType::Q5_0: std::memcpy(scales + 2 * n, &reinterpret_cast<const BlockQ5_0*>(row)[b].scale_f16, 2); return;
    case DType::Q5_1: {
      const BlockQ5_1& block = reinterpret_cast<const BlockQ5_1*>(row)[b];
      std::memcpy(scales + 2 * n, &block.scale_f16, 2);
      std::memcpy(scales + 32 + 2 * n, &block.min_f16, 2);
      return;
    }
    case DType::IQ4_NL: std::memcpy(scales + 2 * n, &reinterpret_cast<const BlockIQ4_NL*>(row)[b].scale_f16, 2); return;
    case DType::MXFP4: scales[n] = reinterpret_cast<const BlockMXFP4*>(row)[b].e; return;
    default: __builtin_trap();
  }
}

}  // namespace

bool q8_tile_packable(const TensorView& weight) {
  return weight.n_dims == 2 && (weight.dtype == DType::Q8_0 || weight.dtype == DType::Q4_0) &&
         weight.row_length() % 32 == 0;
}

bool q8_packable(const TensorView& weight) {
  const DType type = weight.dtype;
  return q8_tile_packable(weight) ||
         (weight.n_dims == 2 && weight.row_length() % 32 == 0 &&
          (type == DType::Q5_0 || type == DType::Q5_1 || type == DType::IQ4_NL || type == DType::MXFP4));
}

int64_t q8_packed_bytes(const TensorView& weight) {
  return row_groups(weight.n_rows()) * (weight.row_length() / 32) * q8_group_block_bytes(weight.dtype);
}

void q8_pack_into(const TensorView& weight, uint8_t* packed_out) {
  TANDEM_ASSERT(q8_packable(weight));
  const DType type = weight.dtype;
  const int64_t n_rows = weight.n_rows();
  const int64_t n_blocks = weight.row_length() / 32;
  const int64_t block_bytes = q8_group_block_bytes(type);
  uint8_t tile[512];  // tile byte [k * 64 + n * 4 + i]: element 4k + i of row n
  for (int64_t g = 0; g < row_groups(n_rows); ++g) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* out = packed_out + (g * n_blocks + b) * block_bytes;
      std::memset(out, 0, static_cast<size_t>(block_bytes));  // padding rows: codes and scales 0
      std::memset(tile, 0, sizeof(tile));
      for (int64_t n = 0; n < kGroupRows && g * kGroupRows + n < n_rows; ++n) {
        const uint8_t* row_bytes = weight.row(g * kGroupRows + n);
        for (int k = 0; k < 32; ++k) tile[(k / 4) * 64 + n * 4 + k % 4] = block_code(type, row_bytes, b, k);
        copy_block_scale(type, row_bytes, b, n, out + q8_scales_offset(type));
      }
      if (type == DType::Q8_0) {
        std::memcpy(out, tile, 512);
        continue;
      }
      for (int p = 0; p < 256; ++p) out[p] = static_cast<uint8_t>((tile[p] & 0x0f) | ((tile[p + 256] & 0x0f) << 4));
      if (type == DType::Q5_0 || type == DType::Q5_1)
        for (int m = 0; m < 8; ++m)
          for (int q = 0; q < 64; ++q)
            out[kFifthBitsOffset + q] |= static_cast<uint8_t>(((tile[64 * m + q] >> 4) & 1) << m);
    }
  }
}

}  // namespace tandem::packed
