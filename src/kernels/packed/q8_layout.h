// The packed layout of Q8_0 and Q4_0 weights that the AVX2, AVX-512 and AMX levels share:
// groups of 16 rows, block by block, each block's 32 elements in VNNI order — a 64-byte line
// holds 4 consecutive elements of all 16 rows, 4 bytes a row. That is what an AMX B tile
// loads, what 512-bit dpbusd wants with one lane per row, and two 256-bit halves of 8 rows
// for AVX2. Written once at load (model/weight_packing.cpp) into TensorView::packed; plain
// code, no ISA needed to pack.
//
// Per group (the last one zero-padded to 16 rows), per block b of the row:
//   Q8_0 (544 bytes, the size of the 16 original blocks): byte [k * 64 + n * 4 + i] is
//        element 4k + i of row n's block (int8), k = 0..7; then 16 fp16 scales, row n at 2n.
//   Q4_0 (288 bytes): the same 512 values + 8 (0..15, the file's nibbles) packed two to a
//        byte — byte p holds value p (low nibble) and value p + 256 (high nibble), so line k
//        of the low nibbles is elements 4k..4k+3, of the high nibbles 16+4k..16+4k+3; then
//        16 fp16 scales.
#pragma once

#include <cstdint>

#include "base/tensor_view.h"

namespace tandem::packed {

constexpr int64_t kQ8GroupBlockBytes = 512 + 32;
constexpr int64_t kQ4GroupBlockBytes = 256 + 32;
constexpr int64_t kScalesOffsetQ8 = 512;  // the 16 fp16 row scales within a group-block
constexpr int64_t kScalesOffsetQ4 = 256;

constexpr int64_t q8_group_block_bytes(DType type) {
  return type == DType::Q8_0 ? kQ8GroupBlockBytes : kQ4GroupBlockBytes;
}

bool q8_packable(const TensorView& weight);  // Q8_0 or Q4_0, 2-D
int64_t q8_packed_bytes(const TensorView& weight);
void q8_pack_into(const TensorView& weight, uint8_t* out);  // writes q8_packed_bytes(weight) bytes

}  // namespace tandem::packed
