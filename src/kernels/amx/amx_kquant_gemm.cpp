// AMX-INT8 GEMM for Q4_K / Q5_K / Q6_K (see amx_kquant_gemm.h) on the shared packed layout
// (packed/kquant_layout.h). dot_j below is the tile multiply's (activations signed x weights
// unsigned); the integer and float steps after it are the row kernels' (kquant_packed_ops.h).
#include "kernels/amx/amx_kquant_gemm.h"

#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/amx/amx_tiles.h"
#include "kernels/avx512/gemm_packed.h"
#include "kernels/packed/row_groups.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(                                                                        \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8")
#endif

#include "kernels/avx512/kquant_packed_ops.h"

namespace tandem::amx {
namespace {

using namespace avx512::kquant_ops;
using packed::group_store_mask;
using packed::kGroupRows;

constexpr int64_t kTileTokens = 16;
constexpr int64_t kMaxFewTokens = 4;  // decode: the AVX-512 dpbusd kernel, no tile registers

// ---- Prefill: tile multiplies, 16 tokens at a time ---------------------------------------
// A row group's weights are first expanded into B tiles (one per sub-block) in a per-thread
// buffer that every token tile then reads: a tile load right after vector stores to the
// same bytes would wait for them to reach the cache, and the expansion is shared by all
// token tiles. Sub-blocks go two at a time through two C tiles, and a pair's integer
// results are scaled while the next pair multiplies. Q6_K's 16-element sub-blocks ride in
// 32-element tiles: one A tile holds the pair's activations and each B tile holds one
// sub-block's weights next to zeros.

// Gathers the valid token rows of a partial tile (never reading past x); rows after them
// keep stale bytes that only feed C rows that are never read.
inline const int8_t* activation_rows(const ActivationBlockQ8K* first, int64_t n_blocks, int64_t valid, int offset,
                                     int8_t* gathered, int64_t* stride) {
  if (valid == kTileTokens) {
    *stride = n_blocks * static_cast<int64_t>(sizeof(ActivationBlockQ8K));
    return first->quants + offset;
  }
  for (int64_t m = 0; m < valid; ++m) std::memcpy(gathered + m * 32, first[m * n_blocks].quants + offset, 32);
  *stride = 32;
  return gathered;
}

inline void add_scaled_dots(const int32_t* c_tile, __m512i scales, int64_t valid, __m512i* sumi) {
  for (int64_t m = 0; m < valid; ++m)
    sumi[m] = _mm512_add_epi32(sumi[m], _mm512_mullo_epi32(_mm512_load_si512(c_tile + m * kGroupRows), scales));
}

constexpr int64_t kBTileBytes = 512;

// B tiles of every sub-block of a row group, [block][sub-block][512 bytes].
template <DType kType>
void expand_b_tiles(const uint8_t* packed, int64_t n_blocks, uint8_t* tiles) {
  using F = Format<kType>;
  using L = typename F::Layout;
  for (int64_t b = 0; b < n_blocks; ++b)
    for (int j = 0; j < L::kSubBlocks; ++j) {
      // Two blocks ahead; past the group's end this is the next group's start.
      prefetch_part(packed + (b + 2) * L::kBytes, L::kBytes, j, L::kSubBlocks);
      __m512i rows[F::kTileRows];
      F::tile_rows(packed + b * L::kBytes + j * L::kSubBlockBytes, rows);
      uint8_t* tile = tiles + (b * L::kSubBlocks + j) * kBTileBytes;
      if constexpr (F::kTileRows == 8) {
        for (int k = 0; k < 8; ++k) _mm512_store_si512(tile + 64 * k, rows[k]);
      } else {  // even sub-blocks take elements 0..15 of the pair's tile, odd ones 16..31
        const int first_row = 4 * (j % 2);
        for (int k = 0; k < 8; ++k) _mm512_store_si512(tile + 64 * k, _mm512_setzero_si512());
        for (int k = 0; k < 4; ++k) _mm512_store_si512(tile + 64 * (first_row + k), rows[k]);
      }
    }
}

template <DType kType>
void gemm_group_tiles(const TensorView& weight, int64_t group, int64_t store_begin, int64_t store_end,
                      const ActivationBlockQ8K* x, int64_t n_tokens, float* out, int64_t out_stride) {
  using F = Format<kType>;
  using L = typename F::Layout;
  constexpr int kPairs = L::kSubBlocks / 2;
  const int64_t n_blocks = weight.row_length() / 256;
  const uint8_t* packed = weight.packed + group * n_blocks * L::kBytes;
  struct alignas(64) CacheLine {
    uint8_t bytes[64];
  };
  thread_local std::vector<CacheLine> b_buffer;
  const size_t b_vectors = static_cast<size_t>(n_blocks * L::kSubBlocks * kBTileBytes / 64);
  if (b_buffer.size() < b_vectors) b_buffer.resize(b_vectors);
  uint8_t* b_tiles = reinterpret_cast<uint8_t*>(b_buffer.data());
  expand_b_tiles<kType>(packed, n_blocks, b_tiles);
  alignas(64) int32_t c_tiles[2][2][kTileTokens * kGroupRows];  // [pair parity][sub-block of pair]
  alignas(64) int8_t a_tiles[2][kTileTokens * 32] = {};
  const __mmask16 mask = group_store_mask(group, store_begin, store_end);

  for (int64_t token0 = 0; token0 < n_tokens; token0 += kTileTokens) {
    const int64_t valid = std::min<int64_t>(kTileTokens, n_tokens - token0);
    const ActivationBlockQ8K* tokens = x + token0 * n_blocks;
    __m512 acc[kTileTokens];
    __m512i sumi[kTileTokens];
    for (int64_t m = 0; m < kTileTokens; ++m) {
      acc[m] = _mm512_setzero_ps();
      sumi[m] = _mm512_setzero_si512();
    }
    // Step i multiplies pair i % kPairs of block i / kPairs, then scales step i - 1's results.
    const int64_t n_steps = n_blocks * kPairs;
    for (int64_t step = 0; step <= n_steps; ++step) {
      if (step < n_steps) {
        const int64_t b = step / kPairs;
        const int j = static_cast<int>(step % kPairs) * 2;
        const uint8_t* b0 = b_tiles + (b * L::kSubBlocks + j) * kBTileBytes;
        int64_t stride0, stride1;
        const ActivationBlockQ8K* first = tokens + b;
        if constexpr (F::kTileRows == 8) {  // Q4_K, Q5_K: two sub-blocks, two A tiles
          const int8_t* a0 = activation_rows(first, n_blocks, valid, 32 * j, a_tiles[0], &stride0);
          const int8_t* a1 = activation_rows(first, n_blocks, valid, 32 * (j + 1), a_tiles[1], &stride1);
          _tile_loadd(TANDEM_TILE_A32, a0, stride0);
          _tile_loadd(TANDEM_TILE_A32_2, a1, stride1);
        } else {  // Q6_K: one A tile covers both
          const int8_t* a0 = activation_rows(first, n_blocks, valid, 16 * j, a_tiles[0], &stride0);
          _tile_loadd(TANDEM_TILE_A32, a0, stride0);
        }
        _tile_loadd(TANDEM_TILE_B32, b0, 64);
        _tile_loadd(TANDEM_TILE_B32_2, b0 + kBTileBytes, 64);
        _tile_zero(TANDEM_TILE_C);
        _tile_zero(TANDEM_TILE_C2);
        _tile_dpbsud(TANDEM_TILE_C, TANDEM_TILE_A32, TANDEM_TILE_B32);
        if constexpr (F::kTileRows == 8)
          _tile_dpbsud(TANDEM_TILE_C2, TANDEM_TILE_A32_2, TANDEM_TILE_B32_2);
        else
          _tile_dpbsud(TANDEM_TILE_C2, TANDEM_TILE_A32, TANDEM_TILE_B32_2);
        _tile_stored(TANDEM_TILE_C, c_tiles[step % 2][0], 64);
        _tile_stored(TANDEM_TILE_C2, c_tiles[step % 2][1], 64);
      }
      if (step > 0) {
        const int64_t previous = step - 1, b = previous / kPairs;
        const int j = static_cast<int>(previous % kPairs) * 2;
        const uint8_t* block = packed + b * L::kBytes;
        add_scaled_dots(c_tiles[previous % 2][0], sub_block_scales<kType>(block, j), valid, sumi);
        add_scaled_dots(c_tiles[previous % 2][1], sub_block_scales<kType>(block, j + 1), valid, sumi);
        if (j + 2 == L::kSubBlocks) {  // the block's last pair: its float update
          for (int64_t m = 0; m < valid; ++m) {
            acc[m] = F::finish(acc[m], block, tokens[m * n_blocks + b], sumi[m]);
            sumi[m] = _mm512_setzero_si512();
          }
        }
      }
    }
    for (int64_t m = 0; m < valid; ++m)
      _mm512_mask_storeu_ps(out + (token0 + m) * out_stride + group * kGroupRows, mask, acc[m]);
  }
}

}  // namespace

void gemm_kquant(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                 int64_t n_tokens, float* out, int64_t out_stride) {
  TANDEM_ASSERT(weight.packed != nullptr && packed::kquant_packable(weight));
  if (n_tokens <= kMaxFewTokens)
    return avx512::gemm_kquant_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  ensure_tiles_configured();
  const DType type = weight.dtype;
  packed::for_each_row_group(row_begin, row_end, [&](int64_t group, int64_t store_begin, int64_t store_end) {
    if (type == DType::Q4_K)
      gemm_group_tiles<DType::Q4_K>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
    else if (type == DType::Q5_K)  // Q4_K's tiles: 32-element sub-blocks, codes 0..31
      gemm_group_tiles<DType::Q5_K>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
    else
      gemm_group_tiles<DType::Q6_K>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
  });
}

}  // namespace tandem::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
