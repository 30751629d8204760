// AMX-INT8 GEMM for Q8_0 / Q4_0 (see amx_gemm.h).
//
// Packed layout, per group of 16 weight rows (the last group zero-padded), per block b:
//   Q8_0: 512 bytes of int8 in VNNI order — byte [j * 64 + n * 4 + i] is element 4j + i of
//         row n's block — then 16 fp16 scales (one per row): 544 bytes, the size of the
//         original 16 blocks.
//   Q4_0: the same 512 values + 8 as nibbles — byte p holds value p (low) and value p + 256
//         (high) — then 16 fp16 scales: 288 bytes.
// Tile registers as amx_tiles.h names them. Decode (<= 4 tokens) reads the
// same packed tiles with 512-bit dpbusd instead, for the same integers.
#include "kernels/amx/amx_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/amx/amx_kquant_gemm.h"
#include "kernels/amx/amx_tiles.h"
#include "kernels/amx/row_groups.h"
#include "kernels/avx512/gemm_float_packed.h"
#include "kernels/kernel_table.h"

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
constexpr int64_t kQ8GroupBlockBytes = 512 + 32;
constexpr int64_t kQ4GroupBlockBytes = 256 + 32;

int64_t group_block_bytes(DType type) { return type == DType::Q8_0 ? kQ8GroupBlockBytes : kQ4GroupBlockBytes; }

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

// A few tokens (decode) against one row group, without tiles: the packed VNNI layout is what
// 512-bit dpbusd wants with lanes = rows (row j of a B tile holds elements 4j..4j+3 of all 16
// rows), so each lane's integer sum is exactly the tile multiply's C[token][row] — and the
// float steps after it are gemm_group's, so decode and prefill give the same bits. It saves
// the tile store/reload round trips, which dominate when there is only one token.
template <DType kType>
void gemm_group_vnni_few_tokens(const TensorView& weight, int64_t group, int64_t store_begin, int64_t store_end,
                                const ActivationBlockQ8* x, int64_t n_tokens, float* out, int64_t out_stride) {
  constexpr int64_t kMaxTokens = 4;
  const int64_t n_blocks = weight.row_length() / 32;
  const int64_t block_bytes = group_block_bytes(kType);
  const uint8_t* packed = weight.packed + group * n_blocks * block_bytes;
  const __m512i offset_bytes = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i low_mask = _mm512_set1_epi8(0x0f);
  __m512 acc[kMaxTokens];
  for (int64_t m = 0; m < kMaxTokens; ++m) acc[m] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = packed + b * block_bytes;
    for (int64_t line = 0; line < block_bytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(block + 4 * block_bytes + line), _MM_HINT_T0);
    __m512i rows[8];
    __m512i q8_offset = _mm512_setzero_si512();  // Q8_0: 128 * (sum of each row's 32 weights)
    if constexpr (kType == DType::Q8_0) {
      for (int j = 0; j < 8; ++j) {
        rows[j] = _mm512_loadu_si512(block + 64 * j);
        q8_offset = _mm512_dpbusd_epi32(q8_offset, offset_bytes, rows[j]);
      }
    } else {
      for (int j = 0; j < 4; ++j) {
        const __m512i bytes = _mm512_loadu_si512(block + 64 * j);
        rows[j] = _mm512_and_si512(bytes, low_mask);                           // nibble = q + 8
        rows[j + 4] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_mask);
      }
    }
    const __m512 row_scales =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + block_bytes - 32)));
    for (int64_t m = 0; m < n_tokens; ++m) {
      const ActivationBlockQ8& activations = x[m * n_blocks + b];
      int32_t words[8];
      std::memcpy(words, activations.quants, sizeof(words));
      __m512i lanes;
      if constexpr (kType == DType::Q8_0) {
        // (x + 128) * w summed, minus the offset's share: exactly sum x * w.
        lanes = _mm512_sub_epi32(_mm512_setzero_si512(), q8_offset);
        for (int j = 0; j < 8; ++j)
          lanes = _mm512_dpbusd_epi32(lanes, _mm512_xor_si512(_mm512_set1_epi32(words[j]), offset_bytes), rows[j]);
      } else {
        // nibble * x summed, minus 8 * sum x: exactly sum (q) * x with q = nibble - 8.
        int32_t sum_x = 0;
        for (int k = 0; k < 32; ++k) sum_x += activations.quants[k];
        lanes = _mm512_set1_epi32(-8 * sum_x);
        for (int j = 0; j < 8; ++j) lanes = _mm512_dpbusd_epi32(lanes, rows[j], _mm512_set1_epi32(words[j]));
      }
      const __m512 scale = _mm512_mul_ps(row_scales, _mm512_set1_ps(activations.scale));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), scale, acc[m]);
    }
  }
  const auto mask = static_cast<__mmask16>(((1u << (store_end - store_begin)) - 1) << (store_begin - group * kGroupRows));
  for (int64_t m = 0; m < n_tokens; ++m) _mm512_mask_storeu_ps(out + m * out_stride + group * kGroupRows, mask, acc[m]);
}

}  // namespace

bool packable(const TensorView& weight) {
  return weight.n_dims == 2 && (weight.dtype == DType::Q8_0 || weight.dtype == DType::Q4_0 ||
                                kquant_packable(weight) || avx512::float_packable(weight));
}

int64_t packed_bytes(const TensorView& weight) {
  if (kquant_packable(weight)) return kquant_packed_bytes(weight);
  if (avx512::float_packable(weight)) return avx512::float_packed_bytes(weight);
  const int64_t n_groups = (weight.n_rows() + kGroupRows - 1) / kGroupRows;
  return n_groups * (weight.row_length() / 32) * group_block_bytes(weight.dtype);
}

std::vector<uint8_t> pack(const TensorView& weight) {
  std::vector<uint8_t> packed(static_cast<size_t>(packed_bytes(weight)));
  pack_into(weight, packed.data());
  return packed;
}

void pack_into(const TensorView& weight, uint8_t* packed_out) {
  TANDEM_ASSERT(packable(weight));
  if (kquant_packable(weight)) {
    kquant_pack_into(weight, packed_out);
    return;
  }
  if (avx512::float_packable(weight)) {
    avx512::float_pack_into(weight, packed_out);
    return;
  }
  const DType type = weight.dtype;
  const int64_t n_rows = weight.n_rows();
  const int64_t n_blocks = weight.row_length() / 32;
  const int64_t n_groups = (n_rows + kGroupRows - 1) / kGroupRows;
  const int64_t block_bytes = group_block_bytes(type);
  int8_t values[512];
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* out = packed_out + (g * n_blocks + b) * block_bytes;
      uint16_t* scales = reinterpret_cast<uint16_t*>(out + block_bytes - 32);
      std::memset(values, 0, sizeof(values));
      for (int64_t n = 0; n < kGroupRows; ++n) {
        const int64_t row = g * kGroupRows + n;
        if (row >= n_rows) {
          scales[n] = 0;
          continue;
        }
        const uint8_t* row_bytes = weight.row(row);
        int8_t block[32];
        for (int k = 0; k < 32; ++k) block[k] = block_value(type, row_bytes, b, k);
        for (int k4 = 0; k4 < 8; ++k4) std::memcpy(values + k4 * 64 + n * 4, block + 4 * k4, 4);
        scales[n] = block_scale_bits(type, row_bytes, b);
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

void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride) {
  if (weight.packed == nullptr)
    avx512::gemm_float(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  else
    avx512::gemm_float_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
             int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed == nullptr) {
    avx512::gemm_q8(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    return;
  }
  const bool few_tokens = n_tokens <= 4;  // decode: dpbusd on the packed tiles, no tile registers
  if (!few_tokens) ensure_tiles_configured();
  const bool q8 = weight.dtype == DType::Q8_0;
  for_each_row_group(row_begin, row_end, [&](int64_t group, int64_t store_begin, int64_t store_end) {
    if (few_tokens && q8)
      gemm_group_vnni_few_tokens<DType::Q8_0>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
    else if (few_tokens)
      gemm_group_vnni_few_tokens<DType::Q4_0>(weight, group, store_begin, store_end, x, n_tokens, out, out_stride);
    else if (q8)
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
