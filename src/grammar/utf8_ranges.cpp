// Code point ranges to UTF-8 byte-range sequences: a range is split until, within each
// piece, every continuation byte independently spans its range (so the piece is a product
// of byte ranges). Splits come at encoded-length boundaries, then at 6-bit boundaries.
#include "grammar/utf8_ranges.h"

#include <algorithm>

#include "base/error.h"

namespace tandem::grammar {
namespace {

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// The UTF-8 bytes of `cp`, `n` of them.
void encode(uint32_t cp, int n, uint8_t* out) {
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// [lo, hi] with one encoded length.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>& out) {
  const int n = encoded_length(lo);
  // If lo and hi differ above the low 6*i bits, the low part of lo must start at all zeros
  // and the low part of hi end at all ones; otherwise split there and recurse.
  for (int i = 1; i < n; ++i) {
    const uint32_t mask = (1u << (6 * i)) - 1;
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        split_same_length(lo, lo | mask, out);
        split_same_length((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        split_same_length(lo, (hi & ~mask) - 1, out);
        split_same_length(hi & ~mask, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, n, a);
  encode(hi, n, b);
  std::vector<ByteRange> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate) {
  std::sort(ranges.begin(), ranges.end(), [](auto a, auto b) { return a.lo < b.lo; });
  std::vector<CodePointRange> merged;
  for (CodePointRange r : ranges) {
    r.hi = std::min(r.hi, kMaxCodePoint);
    if (r.lo > r.hi) continue;
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (negate) {
    std::vector<CodePointRange> complement;
    uint32_t next = 0;
    for (CodePointRange r : merged) {
      if (r.lo > next) complement.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
    merged = std::move(complement);
  }
  // Cut the surrogates out.
  std::vector<CodePointRange> out;
  for (CodePointRange r : merged) {
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      out.push_back(r);
      continue;
    }
    if (r.lo < 0xD800) out.push_back({r.lo, 0xD7FF});
    if (r.hi > 0xDFFF) out.push_back({0xE000, r.hi});
  }
  return out;
}

std::vector<std::vector<ByteRange>> utf8_sequences(CodePointRange range) {
  TANDEM_ASSERT(range.lo <= range.hi && range.hi <= kMaxCodePoint);
  std::vector<std::vector<ByteRange>> out;
  static constexpr uint32_t kLengthEnds[4] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  uint32_t lo = range.lo;
  for (uint32_t end : kLengthEnds) {
    if (lo > range.hi) break;
    if (lo > end) continue;
    const uint32_t hi = std::min(range.hi, end);
    split_same_length(lo, hi, out);
    lo = hi + 1;
  }
  return out;
}

}  // namespace tandem::grammar
