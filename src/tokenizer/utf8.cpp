// UTF-8 character splitting and the ill-formed-sequence sanitizer (see utf8.h).
#include "tokenizer/utf8.h"

namespace tandem {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// For a lead byte: the sequence length and the allowed range of the second byte, which is
// where overlong forms, surrogates and code points past U+10FFFF are ruled out.
struct LeadInfo {
  int length;  // 0: not a lead byte
  uint8_t lo, hi;
};

LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

size_t utf8_sequence_length(std::string_view text, size_t pos) {
  const LeadInfo info = lead_info(static_cast<uint8_t>(text[pos]));
  if (info.length <= 1) return 1;
  if (text.size() - pos < static_cast<size_t>(info.length)) return 1;
  uint8_t lo = info.lo, hi = info.hi;
  for (int i = 1; i < info.length; ++i) {
    const uint8_t b = static_cast<uint8_t>(text[pos + i]);
    if (b < lo || b > hi) return 1;
    lo = 0x80;
    hi = 0xBF;
  }
  return static_cast<size_t>(info.length);
}

size_t utf8_character_start(std::string_view text, size_t pos) {
  // A byte that is not a continuation byte always starts a character (well-formed sequences
  // hold continuation bytes only after their lead); so does a continuation byte no lead in
  // the three bytes before it reaches over.
  const auto continuation = [&](size_t i) { return (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80; };
  if (!continuation(pos)) return pos;
  for (size_t back = 1; back <= 3 && back <= pos; ++back) {
    const size_t lead = pos - back;
    if (!continuation(lead)) return utf8_sequence_length(text, lead) > back ? lead : pos;
  }
  return pos;
}

void Utf8Sanitizer::feed(std::string_view bytes, std::string& out) {
  for (char c : bytes) feed_byte(static_cast<uint8_t>(c), out);
}

void Utf8Sanitizer::feed_byte(uint8_t b, std::string& out) {
  if (n_held_ > 0) {
    if (b >= next_lo_ && b <= next_hi_) {
      held_[n_held_++] = static_cast<char>(b);
      next_lo_ = 0x80;
      next_hi_ = 0xBF;
      if (n_held_ == n_needed_) {
        out.append(held_, n_held_);
        n_held_ = 0;
      }
      return;
    }
    // The held prefix can no longer complete: one U+FFFD for it, then `b` starts afresh.
    out += kReplacement;
    n_held_ = 0;
  }
  const LeadInfo info = lead_info(b);
  if (info.length == 1) {
    out += static_cast<char>(b);
  } else if (info.length == 0) {
    out += kReplacement;
  } else {
    held_[0] = static_cast<char>(b);
    n_held_ = 1;
    n_needed_ = info.length;
    next_lo_ = info.lo;
    next_hi_ = info.hi;
  }
}

void Utf8Sanitizer::finish(std::string& out) {
  if (n_held_ > 0) out += kReplacement;
  n_held_ = 0;
}

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  Utf8Sanitizer sanitizer;
  sanitizer.feed(bytes, out);
  sanitizer.finish(out);
  return out;
}

}  // namespace tandem
