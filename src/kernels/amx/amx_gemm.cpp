// AMX-INT8 GEMM for Q8_0 / Q4_0 (see amx_gemm.h) on the shared packed layout
// (packed/q8_layout.h: a group-block's 512 values are one B tile). Tile registers as
// amx_tiles.h names them. Decode (<= 4 tokens) reads the same packed bytes with 512-bit
// dpbusd instead (avx512/gemm_q8_packed.cpp), for the same integers and float steps.
#include "kernels/amx/amx_gemm.h"

#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/amx/amx_tiles.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/gemm_packed.h"
#include "kernels/packed/q8_layout.h"
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

namespace tandem::amx {
namespace {

using packed::group_store_mask;
using packed::kGroupRows;

constexpr int64_t kTileTokens = 16;

int64_t group_block_bytes(DType type) { return packed::q8_group_block_bytes(type); }

// Expands a packed Q4_0 group-block into the 512 int8 values of a B tile.
inline void unpack_q4(const uint8_t* packed, int8_t* tile) {
  const __m512i low_mask = _mm512_set1_epi8(0x0f);
  const __m512i eight = _mm512_set1_epi8(8);
  for (int i = 0; i < 4; ++i) {
    const __m512i bytes = _mm512_loadu_si512(packed + i * 64);
    const __m512i low = _mm512_sub_epi8(_mm512_and_si512(bytes, low_mask), eight);
    const __m512i high = _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_mask), eight);
    _mm512_storeu_si512(tile + i * 64, low);
    _mm512_storeu_si512(tile + 256 + i * 64, high);
  }
}

// Prefill for one row group: blocks go two at a time through two C tiles, and a pair's
// integer results are scaled while the next pair multiplies (tile registers are not renamed,
// so one C tile would serialise multiply, store and the next zero). Q4_0 groups are first
// expanded to int8 B tiles in a per-thread buffer shared by every token tile: a tile load
// right after vector stores to the same bytes waits for them to reach the cache.
template <DType kType>
void gemm_group(const TensorView& weight, int64_t group, int64_t store_begin, int64_t store_end,
                const ActivationBlockQ8* x, int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t n_blocks = weight.row_length() / 32;
  const int64_t block_bytes = group_block_bytes(kType);
  const uint8_t* packed = weight.packed + group * n_blocks * block_bytes;
  const int64_t activation_stride = n_blocks * static_cast<int64_t>(sizeof(ActivationBlockQ8));
  // B tile of block b and its 16 fp16 row scales.
  const uint8_t* b_tiles = packed;
  int64_t b_tile_stride = block_bytes;
  if constexpr (kType == DType::Q4_0) {
    struct alignas(64) CacheLine {
      uint8_t bytes[64];
    };
    thread_local std::vector<CacheLine> expanded;
    if (expanded.size() < static_cast<size_t>(n_blocks * 8)) expanded.resize(static_cast<size_t>(n_blocks * 8));
    int8_t* tiles = reinterpret_cast<int8_t*>(expanded.data());
    for (int64_t b = 0; b < n_blocks; ++b) {
      _mm_prefetch(reinterpret_cast<const char*>(packed + (b + 4) * block_bytes), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(packed + (b + 4) * block_bytes + 64), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(packed + (b + 4) * block_bytes + 128), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(packed + (b + 4) * block_bytes + 192), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(packed + (b + 4) * block_bytes + 256), _MM_HINT_T0);
      unpack_q4(packed + b * block_bytes, tiles + b * 512);
    }
    b_tiles = reinterpret_cast<const uint8_t*>(tiles);
    b_tile_stride = 512;
  }
  auto row_scales_of = [&](int64_t b) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed + (b + 1) * block_bytes - 32)));
  };
  alignas(64) int32_t c_tiles[2][2][kTileTokens * kGroupRows];  // [pair parity][block of pair]
  alignas(64) int8_t a_tiles[2][kTileTokens * 32] = {};
  const __mmask16 store_mask = group_store_mask(group, store_begin, store_end);

  for (int64_t token0 = 0; token0 < n_tokens; token0 += kTileTokens) {
    const int64_t valid = std::min<int64_t>(kTileTokens, n_tokens - token0);
    const ActivationBlockQ8* tokens = x + token0 * n_blocks;
    __m512 acc[kTileTokens];
    for (int64_t m = 0; m < kTileTokens; ++m) acc[m] = _mm512_setzero_ps();
    auto load_a = [&](int tile_slot, int64_t b) {
      // A partial token tile: gather the valid rows (never read past x). Rows past `valid`
      // hold stale bytes; they only feed C rows that are never read.
      if (valid == kTileTokens) return std::pair<const void*, int64_t>{tokens[b].quants, activation_stride};
      for (int64_t m = 0; m < valid; ++m) std::memcpy(a_tiles[tile_slot] + m * 32, tokens[m * n_blocks + b].quants, 32);
      return std::pair<const void*, int64_t>{a_tiles[tile_slot], 32};
    };
    auto scale_block = [&](const int32_t* c_tile, int64_t b) {
      const __m512 row_scales = row_scales_of(b);
      for (int64_t m = 0; m < valid; ++m) {
        const __m512 scale = _mm512_mul_ps(row_scales, _mm512_set1_ps(tokens[m * n_blocks + b].scale));
        const __m512 dots = _mm512_cvtepi32_ps(_mm512_load_si512(c_tile + m * kGroupRows));
        acc[m] = _mm512_fmadd_ps(dots, scale, acc[m]);
      }
    };
    // Step i multiplies blocks 2i and 2i + 1 (if any), then scales step i - 1's results in
    // block order, so every lane still adds its blocks one after another.
    const int64_t n_steps = (n_blocks + 1) / 2;
    for (int64_t step = 0; step <= n_steps; ++step) {
      if (step < n_steps) {
        const int64_t b = 2 * step;
        if constexpr (kType == DType::Q8_0) {
          // Tile loads do not train the hardware prefetcher well: fetch a few blocks ahead.
          for (int64_t line = 0; line < 2 * block_bytes; line += 64)
            _mm_prefetch(reinterpret_cast<const char*>(packed + (b + 4) * block_bytes + line), _MM_HINT_T0);
        }
        const auto [a0, stride0] = load_a(0, b);
        _tile_loadd(TANDEM_TILE_A32, a0, stride0);
        _tile_loadd(TANDEM_TILE_B32, b_tiles + b * b_tile_stride, 64);
        _tile_zero(TANDEM_TILE_C);
        _tile_dpbssd(TANDEM_TILE_C, TANDEM_TILE_A32, TANDEM_TILE_B32);
        if (b + 1 < n_blocks) {
          const auto [a1, stride1] = load_a(1, b + 1);
          _tile_loadd(TANDEM_TILE_A32_2, a1, stride1);
          _tile_loadd(TANDEM_TILE_B32_2, b_tiles + (b + 1) * b_tile_stride, 64);
          _tile_zero(TANDEM_TILE_C2);
          _tile_dpbssd(TANDEM_TILE_C2, TANDEM_TILE_A32_2, TANDEM_TILE_B32_2);
        }
        _tile_stored(TANDEM_TILE_C, c_tiles[step % 2][0], 64);
        if (b + 1 < n_blocks) _tile_stored(TANDEM_TILE_C2, c_tiles[step % 2][1], 64);
      }
      if (step > 0) {
        const int64_t b = 2 * (step - 1);
        scale_block(c_tiles[(step - 1) % 2][0], b);
        if (b + 1 < n_blocks) scale_block(c_tiles[(step - 1) % 2][1], b + 1);
      }
    }
    for (int64_t m = 0; m < valid; ++m)
      _mm512_mask_storeu_ps(out + (token0 + m) * out_stride + group * kGroupRows, store_mask, acc[m]);
  }
}

}  // namespace

void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride) {
  if (weight.packed == nullptr) {
    avx512::gemm_q8(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    return;
  }
  // Decode: dpbusd on the packed bytes; tile registers do not pay for a few tokens. The
  // formats without a tile kernel (Q5_0, Q5_1, IQ4_NL, MXFP4) go there at every token count.
  if (n_tokens <= 4 || !packed::q8_tile_packable(weight))
    return avx512::gemm_q8_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  ensure_tiles_configured();
  const bool q8 = weight.dtype == DType::Q8_0;
  packed::for_each_row_group(row_begin, row_end, [&](int64_t group, int64_t store_begin, int64_t store_end) {
    if (q8)
      gemm_group<DType::Q8_0>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
    else
      gemm_group<DType::Q4_0>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
  });
}

}  // namespace tandem::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
