// AMX-INT8 GEMM for Q4_K / Q6_K (see amx_kquant_gemm.h).
//
// Packed layout, per group of 16 weight rows (the last group zero-padded), per 256-element
// super-block. "Tile bytes" of a sub-block are its values in the order a B tile holds them:
// byte [k * 64 + n * 4 + i] is element 4k + i of the sub-block in row n.
//   Q4_K (2368 bytes; the 16 original blocks are 2304):
//     8 sub-blocks of 32: 512 tile bytes (q in 0..15) as 256 bytes of nibbles — byte p holds
//       tile byte p (low) and p + 256 (high);
//     scales, then mins, as pairs: byte 32 i + 2 n + e is sub-block 2 i + e's 6-bit value
//       in row n (a pair per 32-bit lane is what vpdpwssd and the even/odd split want);
//     16 fp16 d, 16 fp16 dmin.
//   Q6_K (3360 bytes, the size of the 16 original blocks):
//     16 sub-blocks of 16: 256 tile bytes (q + 32, in 0..63) as 128 bytes of low nibbles
//       (byte p: tile bytes p and p + 128) and 64 bytes of the top two bits (byte p: tile
//       bytes p, p + 64, p + 128, p + 192 in bits 0-1, 2-3, 4-5, 6-7);
//     int8 scales as pairs (byte 32 i + 2 n + e: sub-block 2 i + e of row n); 16 fp16 d.
//
// Integers per (token, row) lane and super-block, exactly those of dot_kquants.cpp:
//   Q4_K: sumi = sum_j scale_j * dot_j, summ = sum_j min_j * (sum of sub-block j's x)
//   Q6_K: sumi = sum_j scale_j * (dot_j - 32 * sum of sub-block j's x)
// where dot_j is the tile multiply's (activations signed x weights unsigned). The float
// update then repeats finish_k4 / finish_d in the same order, with no fused multiply-add.
#include "kernels/amx/amx_kquant_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/kquants.h"
#include "kernels/amx/amx_tiles.h"
#include "kernels/amx/row_groups.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c,amx-tile,amx-int8")
#endif

namespace tandem::amx {
namespace {

constexpr int64_t kTileTokens = 16;
constexpr int64_t kMaxFewTokens = 4;  // decode: dpbusd instead of tile registers
// Decode prefetch distance, in super-blocks (tinyllama Q4_K_M tg: none 6.0, 1 block 31.2,
// 2 blocks 28.9 tok/s: the hardware prefetcher does little for these streams here).
constexpr int64_t kPrefetchBlocks = 1;

// The two formats' packed geometry.
struct Q4KLayout {
  static constexpr int kSubBlocks = 8, kSubBlockLength = 32, kSubBlockBytes = 256;
  static constexpr int64_t kScales = 8 * 256, kMins = kScales + 128, kD = kMins + 128, kDmin = kD + 32;
  static constexpr int64_t kBytes = kDmin + 32;
};
struct Q6KLayout {
  static constexpr int kSubBlocks = 16, kSubBlockLength = 16, kSubBlockBytes = 192;
  static constexpr int64_t kScales = 16 * 192, kD = kScales + 256;
  static constexpr int64_t kBytes = kD + 32;
};
static_assert(Q6KLayout::kBytes == 16 * sizeof(BlockQ6K));

// Keeps a float product from being fused into a neighbouring add (the row kernels round
// every product separately; see dot_kquants.cpp).
inline __m512 opaque(__m512 v) {
  asm("" : "+v"(v));
  return v;
}

// ---- Unpacking one sub-block's tile bytes ------------------------------------------------

inline void q4k_tile_rows(const uint8_t* packed, __m512i rows[8]) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int i = 0; i < 4; ++i) {
    const __m512i bytes = _mm512_loadu_si512(packed + 64 * i);
    rows[i] = _mm512_and_si512(bytes, nibble);
    rows[i + 4] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble);
  }
}

inline void q6k_tile_rows(const uint8_t* packed, __m512i rows[4]) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i top = _mm512_set1_epi8(0x30);
  const __m512i low0 = _mm512_loadu_si512(packed);
  const __m512i low1 = _mm512_loadu_si512(packed + 64);
  const __m512i high = _mm512_loadu_si512(packed + 128);
  // 16-bit shifts carry bits across bytes; the masks keep only each byte's own bits.
  rows[0] = _mm512_or_si512(_mm512_and_si512(low0, nibble), _mm512_and_si512(_mm512_slli_epi16(high, 4), top));
  rows[1] = _mm512_or_si512(_mm512_and_si512(low1, nibble), _mm512_and_si512(_mm512_slli_epi16(high, 2), top));
  rows[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low0, 4), nibble), _mm512_and_si512(high, top));
  rows[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low1, 4), nibble),
                            _mm512_and_si512(_mm512_srli_epi16(high, 2), top));
}

// A pair vector (32-bit lane n = two 16-bit values of row n) from 32 packed bytes.
inline __m512i unsigned_pairs(const uint8_t* bytes) {
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)));
}
inline __m512i signed_pairs(const uint8_t* bytes) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)));
}
// The even (low 16 bits) and odd (high 16 bits) member of each pair as int32.
inline __m512i even_of_pairs(__m512i pairs, bool is_signed) {
  return is_signed ? _mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 16) : _mm512_and_si512(pairs, _mm512_set1_epi32(0xffff));
}
inline __m512i odd_of_pairs(__m512i pairs, bool is_signed) {
  return is_signed ? _mm512_srai_epi32(pairs, 16) : _mm512_srli_epi32(pairs, 16);
}

inline __m512 f16_lanes(const uint8_t* bytes) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)));
}

inline int32_t word_at(const void* bytes, int i) {
  int32_t word;
  std::memcpy(&word, static_cast<const uint8_t*>(bytes) + 4 * i, 4);
  return word;
}

// ---- Per super-block float update (finish_k4 / finish_d of dot_kquants.cpp) --------------

// Q4_K: (x_scale * d) * sumi - (x_scale * dmin) * summ, added to acc.
inline __m512 finish_q4k(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
  // summ = sum_j min_j * (block_sums[2j] + block_sums[2j+1]); the 32-element sums fit int16.
  const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.block_sums));
  const __m256i sums32 = _mm256_madd_epi16(sums16, _mm256_set1_epi16(1));
  alignas(16) int32_t pair_words[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(pair_words),
                  _mm_packs_epi32(_mm256_castsi256_si128(sums32), _mm256_extracti128_si256(sums32, 1)));
  __m512i summ = _mm512_setzero_si512();
  for (int i = 0; i < 4; ++i)
    summ = _mm512_dpwssd_epi32(summ, unsigned_pairs(block + Q4KLayout::kMins + 32 * i), _mm512_set1_epi32(pair_words[i]));
  const __m512 x_scale = _mm512_set1_ps(x.scale);
  const __m512 scaled = opaque(_mm512_mul_ps(_mm512_mul_ps(x_scale, f16_lanes(block + Q4KLayout::kD)), _mm512_cvtepi32_ps(sumi)));
  const __m512 offset =
      opaque(_mm512_mul_ps(_mm512_mul_ps(x_scale, f16_lanes(block + Q4KLayout::kDmin)), _mm512_cvtepi32_ps(summ)));
  return _mm512_add_ps(acc, opaque(_mm512_sub_ps(scaled, offset)));
}

// Q6_K: sumi arrives as sum_j scale_j * dot_j over the unsigned (q + 32) weights; remove
// 32 * sum_j scale_j * (sum of sub-block j's x), then (x_scale * d) * sumi added to acc.
inline __m512 finish_q6k(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
  __m512i offset = _mm512_setzero_si512();
  for (int i = 0; i < 8; ++i)
    offset = _mm512_dpwssd_epi32(offset, signed_pairs(block + Q6KLayout::kScales + 32 * i),
                                 _mm512_set1_epi32(word_at(x.block_sums, i)));
  sumi = _mm512_sub_epi32(sumi, _mm512_slli_epi32(offset, 5));
  const __m512 x_scale = _mm512_set1_ps(x.scale);
  const __m512 scaled = opaque(_mm512_mul_ps(_mm512_mul_ps(x_scale, f16_lanes(block + Q6KLayout::kD)), _mm512_cvtepi32_ps(sumi)));
  return _mm512_add_ps(acc, scaled);
}

template <DType kType>
struct Format;
template <>
struct Format<DType::Q4_K> {
  using Layout = Q4KLayout;
  static constexpr bool kSignedScales = false;
  static constexpr int kTileRows = 8;
  static void tile_rows(const uint8_t* packed, __m512i* rows) { q4k_tile_rows(packed, rows); }
  static __m512 finish(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
    return finish_q4k(acc, block, x, sumi);
  }
};
template <>
struct Format<DType::Q6_K> {
  using Layout = Q6KLayout;
  static constexpr bool kSignedScales = true;
  static constexpr int kTileRows = 4;
  static void tile_rows(const uint8_t* packed, __m512i* rows) { q6k_tile_rows(packed, rows); }
  static __m512 finish(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
    return finish_q6k(acc, block, x, sumi);
  }
};

// Sub-block j's scale in every row, as int32 lanes.
template <DType kType>
inline __m512i sub_block_scales(const uint8_t* block, int j) {
  using F = Format<kType>;
  const uint8_t* pairs = block + F::Layout::kScales + 32 * (j / 2);
  const __m512i both = F::kSignedScales ? signed_pairs(pairs) : unsigned_pairs(pairs);
  return j % 2 == 0 ? even_of_pairs(both, F::kSignedScales) : odd_of_pairs(both, F::kSignedScales);
}

// Prefetches part `part` of `parts` of a packed super-block: spread over the sub-block
// loop, since a burst of prefetches for a whole block stalls once the fill buffers are full.
inline void prefetch_part(const uint8_t* block, int64_t bytes, int part, int parts) {
  const int64_t begin = bytes * part / parts / 64 * 64, end = bytes * (part + 1) / parts;
  for (int64_t line = begin; line < end; line += 64) _mm_prefetch(reinterpret_cast<const char*>(block + line), _MM_HINT_T0);
}

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
        if constexpr (F::kTileRows == 8) {  // Q4_K: two sub-blocks, two A tiles
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

// ---- Decode: a few tokens with 512-bit dpbusd on the packed bytes ------------------------
// Tile row k of a sub-block holds elements 4k..4k+3 of all 16 rows, so dpbusd with the
// token's 4 activation bytes broadcast gives each row's integer sum in its own lane: the
// same integers as the tile multiply.

template <DType kType>
void gemm_group_few_tokens(const TensorView& weight, int64_t group, int64_t store_begin, int64_t store_end,
                           const ActivationBlockQ8K* x, int64_t n_tokens, float* out, int64_t out_stride) {
  using F = Format<kType>;
  using L = typename F::Layout;
  constexpr int kLength = L::kSubBlockLength;
  const int64_t n_blocks = weight.row_length() / 256;
  const uint8_t* packed = weight.packed + group * n_blocks * L::kBytes;
  __m512 acc[kMaxFewTokens];
  for (int64_t m = 0; m < kMaxFewTokens; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = packed + b * L::kBytes;
    __m512i sumi[kMaxFewTokens];
    for (int64_t m = 0; m < kMaxFewTokens; ++m) sumi[m] = _mm512_setzero_si512();
    for (int j = 0; j < L::kSubBlocks; ++j) {
      if (b + kPrefetchBlocks < n_blocks)
        prefetch_part(block + kPrefetchBlocks * L::kBytes, L::kBytes, j, L::kSubBlocks);
      __m512i rows[F::kTileRows];
      F::tile_rows(block + j * L::kSubBlockBytes, rows);
      const __m512i scales = sub_block_scales<kType>(block, j);
      for (int64_t m = 0; m < n_tokens; ++m) {
        const int8_t* activations = x[m * n_blocks + b].quants + kLength * j;
        __m512i dots = _mm512_setzero_si512();
        for (int k = 0; k < F::kTileRows; ++k)
          dots = _mm512_dpbusd_epi32(dots, rows[k], _mm512_set1_epi32(word_at(activations, k)));
        sumi[m] = _mm512_add_epi32(sumi[m], _mm512_mullo_epi32(dots, scales));
      }
    }
    for (int64_t m = 0; m < n_tokens; ++m) acc[m] = F::finish(acc[m], block, x[m * n_blocks + b], sumi[m]);
  }
  const __mmask16 mask = group_store_mask(group, store_begin, store_end);
  for (int64_t m = 0; m < n_tokens; ++m) _mm512_mask_storeu_ps(out + m * out_stride + group * kGroupRows, mask, acc[m]);
}

// ---- Packing -------------------------------------------------------------------------

// Writes one sub-block's tile bytes (value of element 4k + i of row n at [k * 64 + n * 4 + i]).
template <typename GetValue>
void gather_tile_bytes(int length, GetValue value_of, uint8_t* tile) {
  for (int n = 0; n < kGroupRows; ++n)
    for (int e = 0; e < length; ++e) tile[(e / 4) * 64 + n * 4 + e % 4] = value_of(n, e);
}

void pack_q4k_group_block(const TensorView& weight, int64_t group, int64_t b, uint8_t* out) {
  uint8_t q[kGroupRows][256] = {};
  uint8_t scales[kGroupRows][8] = {}, mins[kGroupRows][8] = {};
  uint16_t* d = reinterpret_cast<uint16_t*>(out + Q4KLayout::kD);
  uint16_t* dmin = reinterpret_cast<uint16_t*>(out + Q4KLayout::kDmin);
  for (int n = 0; n < kGroupRows; ++n) {
    const int64_t row = group * kGroupRows + n;
    d[n] = dmin[n] = 0;
    if (row >= weight.n_rows()) continue;
    const BlockQ4K& block = reinterpret_cast<const BlockQ4K*>(weight.row(row))[b];
    unpack_q4k_quants(block, q[n]);
    unpack_k4_scales(block.scales, scales[n], mins[n]);
    d[n] = block.d_f16;
    dmin[n] = block.dmin_f16;
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t tile[512];
    gather_tile_bytes(32, [&](int n, int e) { return q[n][32 * j + e]; }, tile);
    for (int p = 0; p < 256; ++p) out[256 * j + p] = static_cast<uint8_t>(tile[p] | (tile[p + 256] << 4));
  }
  for (int i = 0; i < 4; ++i)
    for (int n = 0; n < kGroupRows; ++n)
      for (int e = 0; e < 2; ++e) {
        out[Q4KLayout::kScales + 32 * i + 2 * n + e] = scales[n][2 * i + e];
        out[Q4KLayout::kMins + 32 * i + 2 * n + e] = mins[n][2 * i + e];
      }
}

void pack_q6k_group_block(const TensorView& weight, int64_t group, int64_t b, uint8_t* out) {
  uint8_t q[kGroupRows][256] = {};  // q + 32
  int8_t scales[kGroupRows][16] = {};
  uint16_t* d = reinterpret_cast<uint16_t*>(out + Q6KLayout::kD);
  for (int n = 0; n < kGroupRows; ++n) {
    const int64_t row = group * kGroupRows + n;
    d[n] = 0;
    if (row >= weight.n_rows()) continue;
    const BlockQ6K& block = reinterpret_cast<const BlockQ6K*>(weight.row(row))[b];
    int8_t values[256];
    unpack_q6k_quants(block, values);
    for (int e = 0; e < 256; ++e) q[n][e] = static_cast<uint8_t>(values[e] + 32);
    std::memcpy(scales[n], block.scales, 16);
    d[n] = block.d_f16;
  }
  for (int j = 0; j < 16; ++j) {
    uint8_t tile[256];
    gather_tile_bytes(16, [&](int n, int e) { return q[n][16 * j + e]; }, tile);
    uint8_t* sub_block = out + 192 * j;
    for (int p = 0; p < 128; ++p) sub_block[p] = static_cast<uint8_t>((tile[p] & 0x0f) | ((tile[p + 128] & 0x0f) << 4));
    for (int p = 0; p < 64; ++p)
      sub_block[128 + p] = static_cast<uint8_t>((tile[p] >> 4) | ((tile[p + 64] >> 4) << 2) | ((tile[p + 128] >> 4) << 4) |
                                                ((tile[p + 192] >> 4) << 6));
  }
  for (int i = 0; i < 8; ++i)
    for (int n = 0; n < kGroupRows; ++n)
      for (int e = 0; e < 2; ++e) out[Q6KLayout::kScales + 32 * i + 2 * n + e] = static_cast<uint8_t>(scales[n][2 * i + e]);
}

int64_t group_block_bytes(DType type) { return type == DType::Q4_K ? Q4KLayout::kBytes : Q6KLayout::kBytes; }

}  // namespace

bool kquant_packable(const TensorView& weight) {
  return weight.n_dims == 2 && (weight.dtype == DType::Q4_K || weight.dtype == DType::Q6_K) &&
         weight.row_length() % 256 == 0;
}

int64_t kquant_packed_bytes(const TensorView& weight) {
  const int64_t n_groups = (weight.n_rows() + kGroupRows - 1) / kGroupRows;
  return n_groups * (weight.row_length() / 256) * group_block_bytes(weight.dtype);
}

void kquant_pack_into(const TensorView& weight, uint8_t* packed_out) {
  TANDEM_ASSERT(kquant_packable(weight));
  const int64_t n_blocks = weight.row_length() / 256;
  const int64_t n_groups = (weight.n_rows() + kGroupRows - 1) / kGroupRows;
  const int64_t bytes = group_block_bytes(weight.dtype);
  for (int64_t g = 0; g < n_groups; ++g)
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* out = packed_out + (g * n_blocks + b) * bytes;
      if (weight.dtype == DType::Q4_K)
        pack_q4k_group_block(weight, g, b, out);
      else
        pack_q6k_group_block(weight, g, b, out);
    }
}

void gemm_kquant(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                 int64_t n_tokens, float* out, int64_t out_stride) {
  TANDEM_ASSERT(weight.packed != nullptr && kquant_packable(weight));
  const bool few_tokens = n_tokens <= kMaxFewTokens;
  if (!few_tokens) ensure_tiles_configured();
  const bool q4k = weight.dtype == DType::Q4_K;
  for_each_row_group(row_begin, row_end, [&](int64_t group, int64_t store_begin, int64_t store_end) {
    if (few_tokens && q4k)
      gemm_group_few_tokens<DType::Q4_K>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
    else if (few_tokens)
      gemm_group_few_tokens<DType::Q6_K>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
    else if (q4k)
      gemm_group_tiles<DType::Q4_K>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
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
