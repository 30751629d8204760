// Packing Q8_0/Q4_0 weights into the shared 16-row VNNI layout (see q8_layout.h).
#include "kernels/packed/q8_layout.h"

#include <cstring>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/packed/row_groups.h"

namespace tandem::packed {

namespace {

// Element k (0..31) of a row's block, as int8.
inline int8_t block_value(DType type, const uint8_t* row, int64_t b, int k) {
  if (type == DType::Q8_0) return reinterpret_cast<const BlockQ8_0*>(row)[b].quants[k];
  const BlockQ4_0& block = reinterpret_cast<const BlockQ4_0*>(row)[b];
  const uint8_t byte = block.nibbles[k % 16];
  return static_cast<int8_t>((k < 16 ? (byte & 0x0f) : (byte >> 4)) - 8);
}

uint16_t block_scale_bits(DType type, const uint8_t* row, int64_t b) {
  return type == DType::Q8_0 ? reinterpret_cast<const BlockQ8_0*>(row)[b].scale_f16
                             : reinterpret_cast<const BlockQ4_0*>(row)[b].scale_f16;
}

}  // namespace

bool q8_packable(const TensorView& weight) {
  return weight.n_dims == 2 && (weight.dtype == DType::Q8_0 || weight.dtype == DType::Q4_0) &&
         weight.row_length() % 32 == 0;
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
  const int64_t scales_offset = type == DType::Q8_0 ? kScalesOffsetQ8 : kScalesOffsetQ4;
  int8_t values[512];
  for (int64_t g = 0; g < row_groups(n_rows); ++g) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* out = packed_out + (g * n_blocks + b) * block_bytes;
      uint8_t* scales = out + scales_offset;
      std::memset(values, 0, sizeof(values));
      for (int64_t n = 0; n < kGroupRows; ++n) {
        const int64_t row = g * kGroupRows + n;
        uint16_t scale = 0;
        if (row < n_rows) {
          const uint8_t* row_bytes = weight.row(row);
          for (int k = 0; k < 32; ++k) values[(k / 4) * 64 + n * 4 + k % 4] = block_value(type, row_bytes, b, k);
          scale = block_scale_bits(type, row_bytes, b);
        }
        std::memcpy(scales + 2 * n, &scale, 2);
      }
      if (type == DType::Q8_0) {
        std::memcpy(out, values, 512);
      } else {
        for (int p = 0; p < 256; ++p)
          out[p] = static_cast<uint8_t>(((values[p] + 8) & 0x0f) | (((values[p + 256] + 8) & 0x0f) << 4));
      }
    }
  }
}

}  // namespace tandem::packed
