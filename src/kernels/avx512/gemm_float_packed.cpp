// AVX-512 GEMM over float weights (F32, F16, BF16) repacked at load into groups of 16 rows
// stored element-major: for each element k, the 16 rows' values side by side. One vector
// load then holds element k of 16 output rows, and every token's activation x[k] is a
// broadcast folded into the FMA: each (token, 16 rows) accumulator gains one FMA per
// element, with no horizontal sums at the end, and one weight load serves a whole tile of
// tokens (prefill) — the row-major kernel needed one load per row and token tile and
// ran out of L2 bandwidth.
//
// Arithmetic per output: lane n of a token's accumulator sums each block of 256 elements as
//   acc = fma(w[row n][k], x[k], acc) for k in the block in order, from 0,
// and the block sums are added to a total in block order — whatever the number of tokens or
// groups in a pass: decode and prefill give the same bits.
#include "kernels/avx512/gemm_float_packed.h"

#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "kernels/packed/row_groups.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif

namespace tandem::avx512 {
namespace {

using packed::kGroupRows;
// Groups per decode pass: two independent accumulation chains (measured: 1 group 12.0, 2
// groups 12.3, 4 groups 11.0 tok/s on tinyllama F16). No software prefetch: in decode it
// made the same kernel three times slower on this machine.
constexpr int kDecodeGroups = 2;

int64_t element_bytes(DType type) { return type == DType::F32 ? 4 : 2; }

// Elements per block: each accumulator sums one block, then joins the running total (kept in
// memory, touched once a block). A single chain over thousands of elements lets rounding
// error grow with the row length; blocks cut it several-fold at no measurable cost.
constexpr int64_t kBlockElements = 256;

// totals[i] = first ? acc[i] : totals[i] + acc[i], for n vectors.
template <int kCount>
inline void add_to_totals(const __m512* acc, float* totals, bool first) {
#pragma GCC unroll 64
  for (int i = 0; i < kCount; ++i) {
    const __m512 sum = first ? acc[i] : _mm512_add_ps(_mm512_load_ps(totals + 16 * i), acc[i]);
    _mm512_store_ps(totals + 16 * i, sum);
  }
}

template <DType kType>
inline __m512 load_group_element(const uint8_t* p) {
  if constexpr (kType == DType::F32) {
    return _mm512_loadu_ps(p);
  } else if constexpr (kType == DType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  }
}

// kGroups consecutive row groups x kTokens tokens. Decode runs several groups so their
// accumulation chains overlap; prefill runs many tokens on one group.
template <DType kType, int kGroups, int kTokens>
inline void packed_tile(const uint8_t* first_group, int64_t group_bytes, int64_t n_in, const float* const* x,
                        float* out, int64_t out_stride, const __mmask16* masks) {
  constexpr int64_t kStep = kType == DType::F32 ? 64 : 32;  // bytes per element of a group
  // Zeroed here too: with n_in == 0 the loop would leave both unwritten (GCC cannot tell
  // that no model has empty rows). A few stores per tile; the loop's work is n_in FMAs each.
  __m512 acc[kGroups][kTokens] = {};
  alignas(64) float totals[kGroups][kTokens][16] = {};
  for (int64_t k = 0; k < n_in; ++k) {
    if (k % kBlockElements == 0) {  // a block's sum goes into the total, in block order
      if (k > 0) add_to_totals<kGroups * kTokens>(&acc[0][0], &totals[0][0][0], k == kBlockElements);
#pragma GCC unroll 16
      for (int g = 0; g < kGroups; ++g)
#pragma GCC unroll 32
        for (int t = 0; t < kTokens; ++t) acc[g][t] = _mm512_setzero_ps();
    }
#pragma GCC unroll 16
    for (int g = 0; g < kGroups; ++g) {
      const __m512 w = load_group_element<kType>(first_group + g * group_bytes + k * kStep);
#pragma GCC unroll 32
      for (int t = 0; t < kTokens; ++t) acc[g][t] = _mm512_fmadd_ps(w, _mm512_set1_ps(x[t][k]), acc[g][t]);
    }
  }
  add_to_totals<kGroups * kTokens>(&acc[0][0], &totals[0][0][0], n_in <= kBlockElements);
#pragma GCC unroll 16
  for (int g = 0; g < kGroups; ++g)
#pragma GCC unroll 32
    for (int t = 0; t < kTokens; ++t)
      _mm512_mask_storeu_ps(out + t * out_stride + g * kGroupRows, masks[g], _mm512_load_ps(totals[g][t]));
}

// kGroups groups x kTokens tokens whose activations are element-major ([k][kTokens]), the
// weights as f32 ([n_in][16] per group); stores the first `valid` tokens. Lane arithmetic as
// packed_tile's (f16/bf16 to f32 is exact, so converting first changes no bit).
template <int kGroups, int kTokens>
inline void transposed_tile(const float* const* groups, int64_t n_in, const float* x, float* out, int64_t out_stride,
                            int64_t valid, const __mmask16* masks) {
  __m512 acc[kGroups][kTokens] = {};  // zeroed here too, as in packed_tile
  alignas(64) float totals[kGroups][kTokens][16] = {};
  for (int64_t k = 0; k < n_in; ++k) {
    if (k % kBlockElements == 0) {
      if (k > 0) add_to_totals<kGroups * kTokens>(&acc[0][0], &totals[0][0][0], k == kBlockElements);
#pragma GCC unroll 32
      for (int i = 0; i < kGroups * kTokens; ++i) acc[i / kTokens][i % kTokens] = _mm512_setzero_ps();
    }
    const float* column = x + k * kTokens;
    __m512 w[kGroups];
#pragma GCC unroll 2
    for (int g = 0; g < kGroups; ++g)
      w[g] = _mm512_loadu_ps(groups[g] + k * 16);  // F32: the packed bytes, maybe unaligned
      // One broadcast per token serving every group, used at once (kept live, 12 broadcasts
      // and 24 accumulators would not fit the 32 registers).
#pragma GCC unroll 32
    for (int t = 0; t < kTokens; ++t) {
      const __m512 xt = _mm512_set1_ps(column[t]);
#pragma GCC unroll 2
      for (int g = 0; g < kGroups; ++g) acc[g][t] = _mm512_fmadd_ps(w[g], xt, acc[g][t]);
    }
  }
  add_to_totals<kGroups * kTokens>(&acc[0][0], &totals[0][0][0], n_in <= kBlockElements);
  for (int g = 0; g < kGroups; ++g)
    for (int64_t t = 0; t < valid; ++t)
      _mm512_mask_storeu_ps(out + t * out_stride + g * kGroupRows, masks[g], _mm512_load_ps(totals[g][t]));
}

// A group's weights as f32 ([n_in][16]): F32 in place, F16/BF16 converted into `scratch`.
template <DType kType>
inline const float* group_as_f32(const uint8_t* group, int64_t n_in, float* scratch) {
  if constexpr (kType == DType::F32) {
    return reinterpret_cast<const float*>(group);
  } else {
    for (int64_t k = 0; k < n_in; ++k) _mm512_store_ps(scratch + 16 * k, load_group_element<kType>(group + k * 32));
    return scratch;
  }
}

template <DType kType>
void gemm_packed_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                       float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  const int64_t group_bytes = n_in * kGroupRows * element_bytes(kType);
  const int64_t first = row_begin / kGroupRows, last = (row_end - 1) / kGroupRows;  // groups, inclusive
  auto mask_of = [&](int64_t group) {
    return packed::group_store_mask(group, std::max(row_begin, group * kGroupRows),
                                    std::min(row_end, (group + 1) * kGroupRows));
  };
  auto group_data = [&](int64_t group) { return weight.packed + group * group_bytes; };
  auto group_out = [&](int64_t group, int64_t token) { return out + token * out_stride + group * kGroupRows; };

  if (n_tokens <= 4) {
    const float* rows[4];
    for (int64_t t = 0; t < n_tokens; ++t) rows[t] = x + t * n_in;
    auto run = [&]<int kGroups>(int64_t group) {
      __mmask16 masks[kGroups];
      for (int g = 0; g < kGroups; ++g) masks[g] = mask_of(group + g);
      switch (n_tokens) {
        case 1:
          return packed_tile<kType, kGroups, 1>(group_data(group), group_bytes, n_in, rows, group_out(group, 0),
                                                out_stride, masks);
        case 2:
          return packed_tile<kType, kGroups, 2>(group_data(group), group_bytes, n_in, rows, group_out(group, 0),
                                                out_stride, masks);
        case 3:
          return packed_tile<kType, kGroups, 3>(group_data(group), group_bytes, n_in, rows, group_out(group, 0),
                                                out_stride, masks);
        default:
          return packed_tile<kType, kGroups, 4>(group_data(group), group_bytes, n_in, rows, group_out(group, 0),
                                                out_stride, masks);
      }
    };
    int64_t group = first;
    for (; group + kDecodeGroups <= last + 1; group += kDecodeGroups) run.template operator()<kDecodeGroups>(group);
    for (; group <= last; ++group) run.template operator()<1>(group);
    return;
  }

  // Prefill: chunks of tokens whose activations fit in L2; each chunk's activations are
  // transposed into tiles of kTileTokens tokens stored element-major ([k][kTileTokens], the
  // last tile padded with zeros), so a tile's broadcasts per element come from one pointer at
  // fixed offsets (separate row pointers do not fit the registers and cost a load per FMA).
  // Then each pair of groups, converted to f32 once per chunk, runs every tile: 2 weight
  // vectors x 14 tokens = 28 accumulators, 16 loads per 28 FMAs (1 group x 24 tokens needed
  // 25 loads and a conversion per 24 FMAs). 1-thread F16 5632x2048, 64 / 512 tokens: 1 x 24
  // 139 / 141 GFLOP/s, 2 x 12 151 / 168, 2 x 14 163 / 182 (3 groups spill).
  constexpr int64_t kTileTokens = 14;
  constexpr int kPairGroups = 2;
  // Each chunk is one more pass over the weights: 1.5 MiB of activations (of the 2 MiB L2)
  // takes a 128-token prompt at d_model 2048 in one (tinyllama F16 pp128, 2 threads, AMX
  // level: 1 MiB chunks 94, 1.5 MiB 105, 2 MiB 100 tok/s).
  const int64_t chunk_tokens =
      std::max<int64_t>(kTileTokens, (int64_t{3} << 19) / (n_in * 4) / kTileTokens * kTileTokens);
  thread_local std::vector<float> transposed;
  struct alignas(64) Line {
    float values[16];
  };
  thread_local std::vector<Line> converted;  // [kPairGroups][n_in] lines of 16 rows
  if (kType != DType::F32 && converted.size() < static_cast<size_t>(kPairGroups * n_in))
    converted.resize(static_cast<size_t>(kPairGroups * n_in));
  for (int64_t chunk = 0; chunk < n_tokens; chunk += chunk_tokens) {
    const int64_t chunk_end = std::min(n_tokens, chunk + chunk_tokens);
    const int64_t n_tiles = (chunk_end - chunk + kTileTokens - 1) / kTileTokens;
    const auto floats = static_cast<size_t>(n_tiles * n_in * kTileTokens);
    if (transposed.size() < floats) transposed.resize(floats);
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      float* tile_data = transposed.data() + tile * n_in * kTileTokens;
      for (int64_t t = 0; t < kTileTokens; ++t) {
        const int64_t token = chunk + tile * kTileTokens + t;
        const float* row = token < chunk_end ? x + token * n_in : nullptr;
        for (int64_t k = 0; k < n_in; ++k) tile_data[k * kTileTokens + t] = row != nullptr ? row[k] : 0.0f;
      }
    }
    for (int64_t group = first; group <= last; group += kPairGroups) {
      const int n_groups = static_cast<int>(std::min<int64_t>(kPairGroups, last + 1 - group));
      const float* weights[kPairGroups];
      __mmask16 masks[kPairGroups];
      for (int g = 0; g < n_groups; ++g) {
        weights[g] =
            group_as_f32<kType>(group_data(group + g), n_in, converted.empty() ? nullptr : converted[g * n_in].values);
        masks[g] = mask_of(group + g);
      }
      for (int64_t tile = 0; tile < n_tiles; ++tile) {
        const int64_t token = chunk + tile * kTileTokens;
        const float* tile_x = transposed.data() + tile * n_in * kTileTokens;
        const int64_t valid = std::min(kTileTokens, chunk_end - token);
        if (n_groups == kPairGroups)
          transposed_tile<kPairGroups, kTileTokens>(weights, n_in, tile_x, group_out(group, token), out_stride, valid,
                                                    masks);
        else
          transposed_tile<1, kTileTokens>(weights, n_in, tile_x, group_out(group, token), out_stride, valid, masks);
      }
    }
  }
}

}  // namespace

bool float_packable(const TensorView& weight) {
  return weight.n_dims == 2 &&
         (weight.dtype == DType::F32 || weight.dtype == DType::F16 || weight.dtype == DType::BF16);
}

int64_t float_packed_bytes(const TensorView& weight) {
  const int64_t n_groups = (weight.n_rows() + kGroupRows - 1) / kGroupRows;
  return n_groups * kGroupRows * weight.row_length() * element_bytes(weight.dtype);
}

namespace {

// Element k of the group's 16 rows side by side; missing rows (past the matrix) are zeros.
template <typename Element>
void pack_groups(const TensorView& weight, uint8_t* out) {
  const int64_t n_rows = weight.n_rows(), n_in = weight.row_length();
  const int64_t n_groups = (n_rows + kGroupRows - 1) / kGroupRows;
  for (int64_t g = 0; g < n_groups; ++g) {
    const Element* rows[kGroupRows];
    for (int64_t n = 0; n < kGroupRows; ++n)
      rows[n] =
          g * kGroupRows + n < n_rows ? reinterpret_cast<const Element*>(weight.row(g * kGroupRows + n)) : nullptr;
    auto* group = reinterpret_cast<Element*>(out) + g * kGroupRows * n_in;
    for (int64_t n = 0; n < kGroupRows; ++n) {
      Element* column = group + n;
      if (rows[n] == nullptr) {
        for (int64_t k = 0; k < n_in; ++k) column[k * kGroupRows] = Element{};
      } else {
        for (int64_t k = 0; k < n_in; ++k) column[k * kGroupRows] = rows[n][k];
      }
    }
  }
}

}  // namespace

void float_pack_into(const TensorView& weight, uint8_t* out) {
  TANDEM_ASSERT(float_packable(weight));
  if (weight.dtype == DType::F32)
    pack_groups<uint32_t>(weight, out);
  else
    pack_groups<uint16_t>(weight, out);
}

void gemm_float_packed(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                       float* out, int64_t out_stride) {
  TANDEM_ASSERT(weight.packed != nullptr && row_begin < row_end);
  switch (weight.dtype) {
    case DType::F32: return gemm_packed_typed<DType::F32>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::F16: return gemm_packed_typed<DType::F16>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::BF16: return gemm_packed_typed<DType::BF16>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    default: __builtin_trap();
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
