// Python str operations over UTF-8 (see py_string.h). Decoding is lenient: a byte that does
// not start a well-formed sequence is one code point of its own, so nothing here throws.
#include "chat/jinja/py_string.h"

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace tandem::jinja {
namespace {

// Decodes the code point at s[pos]; `length` receives its byte count (1 for a bad byte).
char32_t decode_at(std::string_view s, size_t pos, size_t& length) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  length = 1;
  if (b0 < 0x80) return b0;
  size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : b0 >= 0xC0 ? 2 : 0;
  if (n == 0 || pos + n > s.size()) return b0;
  char32_t c = b0 & (0x3F >> (n - 1));
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return b0;
    c = (c << 6) | (b & 0x3F);
  }
  length = n;
  return c;
}

bool in_chars(char32_t c, std::string_view chars) {
  for (size_t i = 0; i < chars.size();) {
    size_t n = 0;
    if (decode_at(chars, i, n) == c) return true;
    i += n;
  }
  return false;
}

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic: the
// scripts chat text mostly uses. Other code points have no case here.
char32_t to_lower_cp(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x100 && c <= 0x137 && c != 0x130) return c | 1;
  if (c >= 0x139 && c <= 0x148 && (c & 1)) return c + 1;
  if (c >= 0x14A && c <= 0x177) return c | 1;
  if (c == 0x178) return 0xFF;
  if (c >= 0x179 && c <= 0x17E && (c & 1)) return c + 1;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

char32_t to_upper_cp(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x137 && c != 0x131) return c & ~char32_t{1};
  if (c >= 0x139 && c <= 0x148 && !(c & 1)) return c - 1;
  if (c >= 0x14A && c <= 0x177) return c & ~char32_t{1};
  if (c >= 0x17A && c <= 0x17E && !(c & 1)) return c - 1;
  if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

bool is_cased(char32_t c) { return to_lower_cp(c) != c || to_upper_cp(c) != c || c == 0xDF; }

std::string map_case(std::string_view s, char32_t (*f)(char32_t)) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    const char32_t c = decode_at(s, i, n);
    if (n == 1 && c >= 0x80) {
      out += s[i];  // an invalid byte stays as it was
    } else if (c == 0xDF && f == to_upper_cp) {
      out += "SS";  // Python: 'ß'.upper() == 'SS'
    } else {
      append_utf8(out, f(c));
    }
    i += n;
  }
  return out;
}

}  // namespace

std::vector<size_t> codepoint_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    offsets.push_back(i);
    size_t n = 0;
    decode_at(s, i, n);
    i += n;
  }
  offsets.push_back(s.size());
  return offsets;
}

size_t py_len(std::string_view s) { return codepoint_offsets(s).size() - 1; }

bool is_py_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c < 0xC0)
    return c == 0xAA || c == 0xB2 || c == 0xB3 || c == 0xB5 || c == 0xB9 || c == 0xBA || (c >= 0xBC && c <= 0xBE);
  if (c == 0xD7 || c == 0xF7) return false;
  if (c >= 0x2000 && c <= 0x2BFF) return false;  // punctuation, symbols, arrows, shapes
  if (c >= 0x3000 && c <= 0x303F) return false;  // CJK punctuation
  if (c >= 0xFE00 && c <= 0xFE0F) return false;  // variation selectors
  if (c >= 0xFF00 && c <= 0xFF0F) return false;  // fullwidth punctuation
  if (c >= 0x1F000) return false;                // emoji and pictographs
  return !is_py_space(c);
}

std::vector<char32_t> decode_utf8(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    out.push_back(decode_at(s, i, n));
    i += n;
  }
  return out;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::vector<size_t> offsets = codepoint_offsets(s);
  const size_t n = offsets.size() - 1;
  auto strippable = [&](size_t i) {
    size_t len = 0;
    const char32_t c = decode_at(s, offsets[i], len);
    return chars ? in_chars(c, *chars) : is_py_space(c);
  };
  size_t begin = 0, end = n;
  if (left) {
    while (begin < end && strippable(begin)) ++begin;
  }
  if (right) {
    while (end > begin && strippable(end - 1)) --end;
  }
  return std::string(s.substr(offsets[begin], offsets[end] - offsets[begin]));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    // Splitting by a separator keeps empty fields; rsplit counts splits from the end.
    if (!from_right) {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        const size_t hit = s.find(*sep, start);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(start, hit - start));
        start = hit + sep->size();
      }
      parts.emplace_back(s.substr(start));
      return parts;
    }
    size_t end = s.size();
    std::vector<std::string> reversed;
    while (maxsplit < 0 || static_cast<int64_t>(reversed.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      reversed.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    reversed.emplace_back(s.substr(0, end));
    return {reversed.rbegin(), reversed.rend()};
  }
  // Whitespace splitting drops empty fields; the unsplit rest keeps its inner spaces.
  const std::vector<size_t> offsets = codepoint_offsets(s);
  const size_t n = offsets.size() - 1;
  auto space = [&](size_t i) {
    size_t len = 0;
    return is_py_space(decode_at(s, offsets[i], len));
  };
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < n && space(i)) ++i;
      if (i == n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.emplace_back(py_strip(s.substr(offsets[i]), std::nullopt, false, true));
        break;
      }
      size_t j = i;
      while (j < n && !space(j)) ++j;
      parts.emplace_back(s.substr(offsets[i], offsets[j] - offsets[i]));
      i = j;
    }
    return parts;
  }
  std::vector<std::string> reversed;
  size_t j = n;
  while (true) {
    while (j > 0 && space(j - 1)) --j;
    if (j == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(reversed.size()) == maxsplit) {
      reversed.emplace_back(py_strip(s.substr(0, offsets[j]), std::nullopt, true, false));
      break;
    }
    size_t i = j;
    while (i > 0 && !space(i - 1)) --i;
    reversed.emplace_back(s.substr(offsets[i], offsets[j] - offsets[i]));
    j = i;
  }
  return {reversed.rbegin(), reversed.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const char32_t c = decode_at(s, i, len);
    const bool is_break = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                          c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) {
      i += len;
      continue;
    }
    lines.emplace_back(s.substr(start, i - start));
    i += len;
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    start = i;
  }
  if (start < s.size()) lines.emplace_back(s.substr(start));
  return lines;
}

std::string py_replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` between every code point (and at both ends).
    const std::vector<size_t> offsets = codepoint_offsets(s);
    int64_t done = 0;
    for (size_t k = 0; k < offsets.size(); ++k) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      if (k + 1 < offsets.size()) out += s.substr(offsets[k], offsets[k + 1] - offsets[k]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old_text, start);
    if (hit == std::string_view::npos) break;
    out += s.substr(start, hit - start);
    out += new_text;
    start = hit + old_text.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

std::string py_lower(std::string_view s) { return map_case(s, to_lower_cp); }
std::string py_upper(std::string_view s) { return map_case(s, to_upper_cp); }

std::string py_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    const char32_t c = decode_at(s, i, n);
    const std::string one(s.substr(i, n));
    out += previous_cased ? py_lower(one) : py_upper(one);
    previous_cased = is_cased(c);
    i += n;
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  if (s.empty()) return "";
  size_t n = 0;
  decode_at(s, 0, n);
  return py_upper(s.substr(0, n)) + py_lower(s.substr(n));
}

std::string repr_string(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const char32_t c = decode_at(s, i, len);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && c < 0xA0) || (len == 1 && c >= 0x80)) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
    } else {
      out += s.substr(i, len);
    }
    i += len;
  }
  out += quote;
  return out;
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '\'': out += "&#39;"; break;
      case '"': out += "&#34;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace tandem::jinja
