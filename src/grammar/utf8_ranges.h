// utf8_ranges: lowers a set of Unicode code points (a character class) to UTF-8 byte-range
// sequences, the only terminals a Grammar has. Surrogates (U+D800..U+DFFF) are never encoded:
// they are not characters, and valid UTF-8 has no encoding for them.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tandem::grammar {

// A closed range of code points.
struct CodePointRange {
  uint32_t lo = 0, hi = 0;
};

// A byte range [lo, hi] for one position of an encoded character.
using ByteRange = std::pair<uint8_t, uint8_t>;

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// Sorted, merged, surrogate-free ranges covering exactly the union of `ranges` (or, with
// `negate`, every code point but those).
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate);

// Sequences of byte ranges whose concatenations are exactly the UTF-8 encodings of the code
// points in `range` (lo <= hi, no surrogates inside): each sequence is one alternative.
std::vector<std::vector<ByteRange>> utf8_sequences(CodePointRange range);

}  // namespace tandem::grammar
