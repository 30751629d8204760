// Where each element of an F16 weight matrix and of the activations lives in the tensor-core
// layout of matmul_f16_mma.cu: the register fragments of the warp-wide
// mma.sync.m16n8k16.row.col.f32.f16.f16.f32 instruction (PTX ISA, "Matrix Fragments for
// mma.m16n8k16"), laid out in memory in the order the lanes load them, so that a warp reads a
// whole 16x16 weight tile as one contiguous 512-byte run (16 bytes a lane) and an 8-token x
// 16-column activation tile as 256 bytes (8 a lane). Host code (the weights are repacked once
// at upload; tests check this mapping and the device's packing against it on any machine).
//
// Lane l of a warp has group g = l / 4 and thread t = l % 4.
//   A (weights, 16 rows x 16 columns), 8 halves a lane: half i is row g + 8 * ((i / 2) % 2),
//     column 2t + i % 2 + 8 * (i / 4).
//   B (activations, 16 columns x 8 tokens), 4 halves a lane: half j is column 2t + j % 2 +
//     8 * (j / 2), token g.
//   C/D (f32, 16 rows x 8 tokens), 4 floats a lane: float i is row g + 8 * (i / 2), token 2t + i % 2.
#pragma once

#include <cstdint>

namespace tandem::cuda {

constexpr int64_t kMmaRows = 16;            // weight rows per tile
constexpr int64_t kMmaCols = 16;            // columns (the reduction) per tile
constexpr int64_t kMmaTokens = 8;           // tokens per activation tile
constexpr int64_t kTileHalves = 256;        // halves in a weight tile (8 per lane)
constexpr int64_t kActivationHalves = 128;  // halves in an activation tile (4 per lane)

inline int64_t weight_tile_row(int lane, int half) { return lane / 4 + 8 * ((half / 2) % 2); }
inline int64_t weight_tile_col(int lane, int half) { return 2 * (lane % 4) + half % 2 + 8 * (half / 4); }
inline int64_t activation_tile_col(int lane, int half) { return 2 * (lane % 4) + half % 2 + 8 * (half / 2); }
inline int64_t activation_tile_token(int lane) { return lane / 4; }
inline int64_t output_tile_row(int lane, int element) { return lane / 4 + 8 * (element / 2); }
inline int64_t output_tile_token(int lane, int element) { return 2 * (lane % 4) + element % 2; }

// Whether a matrix can take the tensor-core layout: F16 rows and columns in whole tiles. A
// property of the matrix alone, so a matrix's kernel never depends on the batch.
inline bool fits_f16_mma(int64_t n_rows, int64_t n_cols) {
  return n_rows > 0 && n_cols > 0 && n_rows % kMmaRows == 0 && n_cols % kMmaCols == 0;
}

// Row-major F16 bits [n_rows, n_cols] -> tiles: tile (row tile r, column tile k) at
// (r * n_cols / 16 + k) * 256 halves, lane l's 8 halves at l * 8 within it.
inline void pack_f16_mma_weights(const uint16_t* rows, int64_t n_rows, int64_t n_cols, uint16_t* tiles) {
  const int64_t col_tiles = n_cols / kMmaCols;
  for (int64_t r = 0; r < n_rows / kMmaRows; ++r)
    for (int64_t k = 0; k < col_tiles; ++k) {
      uint16_t* tile = tiles + (r * col_tiles + k) * kTileHalves;
      for (int lane = 0; lane < 32; ++lane)
        for (int half = 0; half < 8; ++half)
          tile[lane * 8 + half] =
              rows[(r * kMmaRows + weight_tile_row(lane, half)) * n_cols + k * kMmaCols + weight_tile_col(lane, half)];
    }
}

// Q8_0 rows (34-byte blocks: an f16 scale d, then 32 int8 quants) in the same fragment order:
// per 16-row tile and 32-column block, lane l's 16 bytes are the int8 quants of its A fragment
// for the block's first 16 columns (bytes 0..7, half i as above) then its second 16 (8..15),
// 512 bytes a tile-block; after all of those, the scales: 16 f16 per tile-block, row order.
// The same bytes as the rows (16 x 34 per tile-block), reordered.
inline bool fits_q8_0_mma(int64_t n_rows, int64_t n_cols) {
  return n_rows > 0 && n_cols > 0 && n_rows % kMmaRows == 0 && n_cols % 32 == 0;
}
inline int64_t q8_0_mma_scale_offset(int64_t n_rows, int64_t n_cols) {
  return n_rows / kMmaRows * (n_cols / 32) * 512;  // bytes of quants before the scales
}
inline void pack_q8_0_mma_weights(const uint8_t* rows, int64_t n_rows, int64_t n_cols, uint8_t* packed) {
  const int64_t col_blocks = n_cols / 32, row_bytes = col_blocks * 34;
  uint8_t* scales = packed + q8_0_mma_scale_offset(n_rows, n_cols);
  for (int64_t r = 0; r < n_rows / kMmaRows; ++r)
    for (int64_t b = 0; b < col_blocks; ++b) {
      uint8_t* tile = packed + (r * col_blocks + b) * 512;
      for (int lane = 0; lane < 32; ++lane)
        for (int byte = 0; byte < 16; ++byte) {
          const int half = byte % 8;
          const int64_t row = r * kMmaRows + weight_tile_row(lane, half);
          const int64_t col = 16 * (byte / 8) + weight_tile_col(lane, half);  // within the block
          tile[lane * 16 + byte] = rows[row * row_bytes + b * 34 + 2 + col];
        }
      for (int64_t i = 0; i < kMmaRows; ++i)
        for (int byte = 0; byte < 2; ++byte)
          scales[((r * col_blocks + b) * kMmaRows + i) * 2 + byte] =
              rows[(r * kMmaRows + i) * row_bytes + b * 34 + byte];
    }
}

// Gate and up rows ([n, row_bytes] each) interleaved for MmaOutput::SwiGluPacked: rows
// 16k..16k+7 are gate rows 8k..8k+7, rows 16k+8..16k+15 are up rows 8k..8k+7. n % 8 == 0.
inline void interleave_gate_up_rows(const uint8_t* gate, const uint8_t* up, int64_t n, int64_t row_bytes,
                                    uint8_t* rows) {
  for (int64_t r = 0; r < 2 * n; ++r) {
    const int64_t source = r / 16 * 8 + r % 8;
    const uint8_t* from = (r % 16 < 8 ? gate : up) + source * row_bytes;
    for (int64_t i = 0; i < row_bytes; ++i) rows[r * row_bytes + i] = from[i];
  }
}

// Halves of the packed activations of n_tokens rows of n_cols: whole 8-token tiles, the
// tokens past n_tokens zero.
inline int64_t f16_mma_activation_halves(int64_t n_tokens, int64_t n_cols) {
  return (n_tokens + kMmaTokens - 1) / kMmaTokens * (n_cols / kMmaCols) * kActivationHalves;
}

}  // namespace tandem::cuda
