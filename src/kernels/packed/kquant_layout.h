// The packed layout of Q4_K, Q5_K and Q6_K weights (the k-quants of "Q4_K_M" and "Q5_K_M"
// files) that the AVX2, AVX-512 and AMX levels share: groups of 16 rows, super-block by super-block,
// sub-block by sub-block in VNNI order, no bigger than the file's blocks. Written once at
// load (model/weight_packing.cpp) into TensorView::packed; plain code, no ISA needed to pack.
//
// Per group (the last one zero-padded), per 256-element super-block. "Tile bytes" of a
// sub-block are its values in the order an AMX B tile holds them: byte [k * 64 + n * 4 + i]
// is element 4k + i of the sub-block in row n (so 32 bytes at k * 64 + 32 h are rows 8h..8h+7).
//   Q4_K (2368 bytes; the 16 original blocks are 2304):
//     8 sub-blocks of 32: 512 tile bytes (q in 0..15) as 256 bytes of nibbles — byte p holds
//       tile byte p (low) and p + 256 (high);
//     scales, then mins, as pairs: byte 32 i + 2 n + e is sub-block 2 i + e's 6-bit value
//       in row n (a pair per 32-bit lane is what vpdpwssd and the even/odd split want);
//     16 fp16 d, 16 fp16 dmin.
//   Q5_K (2880 bytes; the 16 original blocks are 2816): as Q4_K, with each sub-block's 256
//     bytes of nibbles (the low 4 bits of q in 0..31) followed by 64 bytes of fifth bits as
//     bit planes — bit m of byte p is the fifth bit of tile byte 64 m + p, so a line's bits
//     are one shift and mask (32 bytes at 32 h for AVX2's half h).
//   Q6_K (3360 bytes, the size of the 16 original blocks):
//     16 sub-blocks of 16: 256 tile bytes (q + 32, in 0..63) as 128 bytes of low nibbles
//       (byte p: tile bytes p and p + 128) and 64 bytes of the top two bits (byte p: tile
//       bytes p, p + 64, p + 128, p + 192 in bits 0-1, 2-3, 4-5, 6-7);
//     int8 scales as pairs (byte 32 i + 2 n + e: sub-block 2 i + e of row n); 16 fp16 d.
//
// The integers every kernel on this layout computes per (token, row) lane and super-block are
// exactly those of the row kernels (kernels/dot_kquants.cpp):
//   Q4_K, Q5_K: sumi = sum_j scale_j * dot_j, summ = sum_j min_j * (sum of sub-block j's x)
//   Q6_K: sumi = sum_j scale_j * (dot_j - 32 * sum of sub-block j's x)
// with dot_j over unsigned weights and signed activations; then the same float steps.
#pragma once

#include <cstdint>

#include "base/tensor_view.h"

namespace tandem::packed {

struct Q4KLayout {
  static constexpr int kSubBlocks = 8, kSubBlockLength = 32, kSubBlockBytes = 256;
  static constexpr int64_t kScales = 8 * 256, kMins = kScales + 128, kD = kMins + 128, kDmin = kD + 32;
  static constexpr int64_t kBytes = kDmin + 32;
};
struct Q5KLayout {
  static constexpr int kSubBlocks = 8, kSubBlockLength = 32, kSubBlockBytes = 256 + 64;
  static constexpr int64_t kFifthBits = 256;  // within a sub-block
  static constexpr int64_t kScales = 8 * kSubBlockBytes, kMins = kScales + 128, kD = kMins + 128, kDmin = kD + 32;
  static constexpr int64_t kBytes = kDmin + 32;
};
struct Q6KLayout {
  static constexpr int kSubBlocks = 16, kSubBlockLength = 16, kSubBlockBytes = 192;
  static constexpr int64_t kScales = 16 * 192, kD = kScales + 256;
  static constexpr int64_t kBytes = kD + 32;
};

constexpr int64_t kquant_group_block_bytes(DType type) {
  return type == DType::Q4_K ? Q4KLayout::kBytes : type == DType::Q5_K ? Q5KLayout::kBytes : Q6KLayout::kBytes;
}

bool kquant_packable(const TensorView& weight);  // Q4_K, Q5_K or Q6_K, 2-D, rows a multiple of 256
int64_t kquant_packed_bytes(const TensorView& weight);
void kquant_pack_into(const TensorView& weight, uint8_t* out);  // writes kquant_packed_bytes(weight)

}  // namespace tandem::packed
