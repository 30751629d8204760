// The packed layout of the 32-element block formats — Q8_0, Q4_0 and Q5_0, Q5_1, IQ4_NL,
// MXFP4 (base/quant32.h) — that the AVX2, AVX-512 and AMX levels share: groups of 16 rows,
// block by block, each block's 32 elements in VNNI order — a 64-byte line holds 4
// consecutive elements of all 16 rows, 4 bytes a row. That is what an AMX B tile loads,
// what 512-bit dpbusd wants with one lane per row, and two 256-bit halves of 8 rows for
// AVX2. Written once at load (model/weight_packing.cpp) into TensorView::packed; plain code,
// no ISA needed to pack.
//
// "Tile byte" [k * 64 + n * 4 + i] (k = 0..7 the line, n the row, i = 0..3) is element
// 4k + i of row n's block. Per group (the last one zero-padded to 16 rows), per block b:
//   Q8_0   (544 bytes, the size of the 16 original blocks): the 512 tile bytes (int8); then
//          16 fp16 scales, row n at 2n.
//   4-bit  (Q4_0 q + 8, IQ4_NL and MXFP4 their 4-bit codes, Q5_0 and Q5_1 the low 4 bits of
//          their 5-bit codes): 256 bytes of nibbles — byte p holds tile byte p (low nibble)
//          and p + 256 (high nibble), so line k of the low nibbles is elements 4k..4k+3, of
//          the high nibbles 16+4k..16+4k+3.
//   Q5_0, Q5_1: then 64 bytes of fifth bits as bit planes — bit m of byte q is the fifth bit
//          of tile byte 64 m + q — so line m's bits are one shift and mask of the 64 bytes
//          (and half h of it, 32 bytes at 32 h, for AVX2).
//   then the scales: Q4_0, IQ4_NL, Q5_0: 16 fp16 d (288, 288, 352 bytes in all);
//          Q5_1: 16 fp16 d, 16 fp16 m (384); MXFP4: 16 e8m0 exponents (272). Each is the
//          size of the 16 original blocks.
#pragma once

#include <cstdint>

#include "base/tensor_view.h"

namespace tandem::packed {

constexpr int64_t kNibbleBytes = 256;      // the 4-bit formats' codes
constexpr int64_t kFifthBitsOffset = 256;  // Q5_0, Q5_1
constexpr int64_t kFifthBitsBytes = 64;

// Where the 16 row scales start within a group-block (Q5_1's 16 mins follow them).
constexpr int64_t q8_scales_offset(DType type) {
  switch (type) {
    case DType::Q8_0: return 512;
    case DType::Q5_0:
    case DType::Q5_1: return kFifthBitsOffset + kFifthBitsBytes;
    default: return kNibbleBytes;
  }
}

constexpr int64_t q8_group_block_bytes(DType type) {
  switch (type) {
    case DType::Q8_0: return 512 + 32;
    case DType::Q5_1: return q8_scales_offset(type) + 64;
    case DType::MXFP4: return q8_scales_offset(type) + 16;
    default: return q8_scales_offset(type) + 32;
  }
}

// Q8_0 or Q4_0 (the types the AMX tiles also take), 2-D.
bool q8_tile_packable(const TensorView& weight);
// Those or Q5_0, Q5_1, IQ4_NL, MXFP4, 2-D.
bool q8_packable(const TensorView& weight);
int64_t q8_packed_bytes(const TensorView& weight);
void q8_pack_into(const TensorView& weight, uint8_t* out);  // writes q8_packed_bytes(weight) bytes

}  // namespace tandem::packed
