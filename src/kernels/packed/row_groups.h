// The 16-row groups every packed weight layout uses (packed/q8_layout.h, packed/kquant_layout.h,
// avx512/gemm_float_packed.h), how a kernel call's row range [row_begin, row_end) meets
// them — a range may start or end inside a group, whose other rows belong to another call
// (another thread) and must not be written — and the slice-and-tile walk of the GEMMs.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem::packed {

constexpr int64_t kGroupRows = 16;

inline int64_t row_groups(int64_t n_rows) { return (n_rows + kGroupRows - 1) / kGroupRows; }

// Calls fn(group, store_begin, store_end) for each group the range touches, with the part
// of the range inside that group.
template <typename Fn>
inline void for_each_row_group(int64_t row_begin, int64_t row_end, Fn&& fn) {
  for (int64_t group = row_begin / kGroupRows; group * kGroupRows < row_end; ++group)
    fn(group, std::max(row_begin, group * kGroupRows), std::min(row_end, (group + 1) * kGroupRows));
}

// Bit n set for the group's rows n in [store_begin, store_end): the lanes a masked store writes.
inline uint16_t group_store_mask(int64_t group, int64_t store_begin, int64_t store_end) {
  return static_cast<uint16_t>(((1u << (store_end - store_begin)) - 1) << (store_begin - group * kGroupRows));
}

// The walk every packed GEMM takes over its row range and tokens: rows in slices of
// `slice_groups` groups, whose weights stay in L2 while every tile of `token_tile` tokens
// (the last one shorter) passes over them. Calls
// tile(group, store_begin, store_end, first_token, n_tile_tokens) for each group of a slice.
template <typename TileFn>
inline void for_each_slice_tile(int64_t row_begin, int64_t row_end, int64_t n_tokens, int64_t slice_groups,
                                int64_t token_tile, TileFn&& tile) {
  const int64_t first = row_begin / kGroupRows, end = (row_end + kGroupRows - 1) / kGroupRows;
  for (int64_t slice = first; slice < end; slice += slice_groups) {
    const int64_t slice_end = std::min(end, slice + slice_groups);
    for (int64_t token = 0; token < n_tokens; token += token_tile) {
      const int64_t count = std::min(token_tile, n_tokens - token);
      for (int64_t group = slice; group < slice_end; ++group)
        tile(group, std::max(row_begin, group * kGroupRows), std::min(row_end, (group + 1) * kGroupRows), token, count);
    }
  }
}

}  // namespace tandem::packed
