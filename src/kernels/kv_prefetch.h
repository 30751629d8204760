// prefetch_head_rows: the decode prefetch of the attention kernels (AVX2 and AVX-512).
// Decode reads each position's K and V rows from memory once: one head's slice of a slot row,
// consecutive positions a whole slot row (every KV head) apart, too far apart for the hardware
// prefetcher to follow. A call with few queries (decode) fetches them some blocks ahead of the
// scores (each level's kPrefetchBlocks); each query's arithmetic is unchanged.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/simd_intrinsics.h"

namespace tandem {

// Calls with fewer queries than this prefetch (decode: a GQA group or a few tokens).
constexpr int64_t kPrefetchBelowQueries = 8;

// Every 64-byte line of one head's slice (head_bytes from offset_bytes) of the rows of
// positions [first, end).
[[gnu::always_inline]] inline void prefetch_head_rows(const KvRows& rows, int64_t offset_bytes, int64_t head_bytes,
                                                      const int32_t* slots, int64_t first, int64_t end) {
  for (int64_t p = first; p < end; ++p) {
    const uintptr_t begin = reinterpret_cast<uintptr_t>(rows.data + slots[p] * rows.row_bytes + offset_bytes);
    for (uintptr_t line = begin & ~uintptr_t{63}; line < begin + head_bytes; line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T0);
  }
}

}  // namespace tandem
