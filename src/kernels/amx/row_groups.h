// The 16-row groups every packed AMX-level layout uses, and how a kernel call's row range
// [row_begin, row_end) meets them: a range may start or end inside a group, whose other
// rows belong to another call (another thread) and must not be written.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem::amx {

constexpr int64_t kGroupRows = 16;

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

}  // namespace tandem::amx
