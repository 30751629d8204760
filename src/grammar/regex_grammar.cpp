// Regex to GBNF by recursive descent: each construct is written as a GBNF expression at once,
// with what the limits need to know about it (whether it can match "", how many optional
// copies and elements it expands to), so a pattern past a limit is refused before the
// grammar is built. Character sets are code point ranges; for a JSON string each character
// becomes the text JSON writes for it.
#include "grammar/regex_grammar.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "grammar/gbnf_literal.h"
#include "grammar/grammar_limits.h"
#include "grammar/json_string_chars.h"
#include "tokenizer/utf8.h"

namespace tandem::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRegexDepth = 100;

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive, code points

Ranges normalized(Ranges ranges) {
  // Surrogates are not characters (they never appear decoded in UTF-8 text).
  Ranges split;
  for (auto [lo, hi] : ranges) {
    if (lo < 0xD800 && hi >= 0xD800) {
      split.emplace_back(lo, 0xD7FF);
      lo = 0xE000;
    }
    if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
    if (lo <= hi) split.emplace_back(lo, hi);
  }
  std::sort(split.begin(), split.end());
  Ranges out;
  for (const auto& r : split) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

Ranges complement(const Ranges& ranges) {
  Ranges sorted = normalized(ranges), out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : sorted) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return normalized(out);
}

Ranges intersect(const Ranges& a, uint32_t lo, uint32_t hi) {
  Ranges out;
  for (const auto& [x, y] : a) {
    const uint32_t l = std::max(x, lo), h = std::min(y, hi);
    if (l <= h) out.emplace_back(l, h);
  }
  return out;
}

std::string utf8(uint32_t cp) {
  std::string s;
  append_utf8(s, static_cast<char32_t>(cp));
  return s;
}

std::string class_char(uint32_t cp) {
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9')) {
    return std::string(1, static_cast<char>(cp));
  }
  return cp < 0x10000 ? fmt::format("\\u{:04X}", cp) : fmt::format("\\U{:08X}", cp);
}

std::string gbnf_class(const Ranges& ranges) {
  if (ranges.size() == 1 && ranges[0].first == ranges[0].second) return gbnf_literal(utf8(ranges[0].first));
  std::string out = "[";
  for (const auto& [lo, hi] : ranges) {
    out += class_char(lo);
    if (hi > lo) {
      out += '-';
      out += class_char(hi);
    }
  }
  out += ']';
  return out;
}

// "(a | b | c)", written piece by piece.
std::string joined(const std::vector<std::string>& alternatives) {
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) {
    if (i > 0) out += " | ";
    out += alternatives[i];
  }
  out += ')';
  return out;
}

// How JSON writes a character that must be escaped inside a string.
std::string json_escape(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return fmt::format("\\u{:04x}", cp);
  }
}

// Any character of a JSON string, as written (the json_schema `char` rule, inline).
// Any character (guided_regex output is raw text).
const char* const kAnyChar = R"([\u0000-\uD7FF\uE000-\U0010FFFF])";

struct Piece {
  std::string gbnf;  // "" matches the empty string
  bool nullable = true;
  uint64_t expanded = 1;    // optional copies multiplied through nested repeats
  uint64_t elements = 0;    // a rough count of grammar elements it expands to
  uint64_t min_length = 0;  // characters
  uint64_t max_length = 0;  // kUnbounded: no bound
};

constexpr uint64_t kUnbounded = UINT64_MAX;

uint64_t add_lengths(uint64_t a, uint64_t b) { return (a == kUnbounded || b == kUnbounded) ? kUnbounded : a + b; }

class RegexCompiler {
 public:
  RegexCompiler(std::string_view pattern, const RegexGrammarOptions& options, std::string what)
      : text_(pattern), options_(options), what_(std::move(what)) {}

  std::string compile(RegexLengths* lengths) {
    if (text_.size() > kMaxRegexBytes)
      throw InputError(fmt::format("{}: the regex is {} bytes (the limit is {}, kMaxRegexBytes)", what_, text_.size(),
                                   kMaxRegexBytes));
    std::vector<std::string> alternatives;
    uint64_t min_length = kUnbounded, max_length = 0;
    do {
      const bool anchored_start = eat('^');
      Piece body = sequence(0);
      bool anchored_end = false;
      if (!at_end() && peek() == '$') {
        ++pos_;
        anchored_end = true;
        if (!at_end() && peek() != '|') fail("'$' is only supported at the end of the pattern or of an alternative");
      }
      std::string text = body.gbnf;
      min_length = std::min(min_length, body.min_length);
      max_length =
          std::max(max_length, (options_.search && !(anchored_start && anchored_end)) ? kUnbounded : body.max_length);
      if (options_.search) {
        const std::string any = std::string("(") + (options_.json_string ? kJsonStringChar : kAnyChar) + ")*";
        if (!anchored_start) text = text.empty() ? any : any + " " + text;
        if (!anchored_end && text != any) text += " " + any;
      }
      alternatives.push_back(text.empty() ? "\"\"" : text);
    } while (eat('|'));
    if (!at_end()) fail("unbalanced ')'");
    if (lengths) {
      lengths->min = min_length;
      lengths->max = max_length == kUnbounded ? std::nullopt : std::optional<uint64_t>(max_length);
    }
    return joined(alternatives);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw InputError(fmt::format("{}: regex at offset {}: {}", what_, pos_, message));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool eat(char c) {
    if (at_end() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }

  uint32_t next_code_point() {
    const auto lead = static_cast<uint8_t>(text_[pos_]);
    const int n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > text_.size()) fail("invalid UTF-8");
    uint32_t cp = n == 1 ? lead : lead & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const auto b = static_cast<uint8_t>(text_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8");
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8");
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  Piece set_piece(const Ranges& ranges_in) {
    const Ranges ranges = normalized(ranges_in);
    Piece p;
    p.nullable = false;
    p.elements = ranges.size() + 1;
    p.min_length = p.max_length = 1;
    if (!options_.json_string) {
      if (ranges.empty()) fail("a character class that matches no character");
      p.gbnf = gbnf_class(ranges);
      return p;
    }
    // Inside a JSON string: characters from U+0020 up, except '"' and '\', are written as they
    // are; those two and the control characters as their escapes.
    const Ranges plain = complement([&] {
      Ranges excluded = complement(intersect(ranges, 0x20, kMaxCodePoint));
      excluded.emplace_back('"', '"');
      excluded.emplace_back('\\', '\\');
      return excluded;
    }());
    std::vector<std::string> alts;
    if (!plain.empty()) alts.push_back(gbnf_class(plain));
    for (const auto& [lo, hi] : ranges) {
      for (uint32_t cp = lo; cp <= hi && cp < 0x20; ++cp) alts.push_back(gbnf_literal(json_escape(cp)));
      if (lo <= '"' && hi >= '"') alts.push_back(gbnf_literal(json_escape('"')));
      if (lo <= '\\' && hi >= '\\') alts.push_back(gbnf_literal(json_escape('\\')));
    }
    if (alts.empty()) fail("a character class that matches no character");
    p.elements += alts.size();
    if (alts.size() == 1) {
      p.gbnf = alts[0];
    } else {
      p.gbnf = joined(alts);
    }
    return p;
  }

  void check_limits(const Piece& p) const {
    if (p.expanded > kMaxExpandedRepetition)
      fail(fmt::format("nested repeats expand to {} optional copies (the limit is {}, kMaxExpandedRepetition)",
                       p.expanded, kMaxExpandedRepetition));
    if (p.elements > kMaxGrammarElements)
      fail(fmt::format("repeats expand to over {} grammar elements (the limit, kMaxGrammarElements)",
                       kMaxGrammarElements));
  }

  Piece alternation(int depth) {
    if (depth > kMaxRegexDepth) fail(fmt::format("groups nested deeper than {}", kMaxRegexDepth));
    std::vector<Piece> parts{sequence(depth)};
    while (eat('|')) parts.push_back(sequence(depth));
    if (parts.size() == 1) return parts[0];
    Piece out;
    out.nullable = false;
    out.min_length = kUnbounded;
    out.gbnf = "(";
    for (size_t i = 0; i < parts.size(); ++i) {
      out.min_length = std::min(out.min_length, parts[i].min_length);
      out.max_length = std::max(out.max_length, parts[i].max_length);
      if (i > 0) out.gbnf += " | ";
      out.gbnf += parts[i].gbnf.empty() ? std::string("\"\"") : parts[i].gbnf;
      out.nullable = out.nullable || parts[i].nullable;
      out.expanded = std::max(out.expanded, parts[i].expanded);
      out.elements += parts[i].elements;
    }
    out.gbnf += ")";
    check_limits(out);
    return out;
  }

  Piece sequence(int depth) {
    Piece out;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && depth == 0) break;
      if (peek() == '^' || peek() == '$')
        fail(fmt::format("the anchor '{}' is only supported at the start ('^') or end ('$') of the pattern or of a "
                         "top-level alternative",
                         peek()));
      Piece atom_piece = atom(depth);
      Piece p = quantified(std::move(atom_piece));
      if (!p.gbnf.empty()) out.gbnf += (out.gbnf.empty() ? "" : " ") + p.gbnf;
      out.nullable = out.nullable && p.nullable;
      out.min_length = add_lengths(out.min_length, p.min_length);
      out.max_length = add_lengths(out.max_length, p.max_length);
      out.expanded = std::max(out.expanded, p.expanded);
      out.elements += p.elements;
      check_limits(out);
    }
    return out;
  }

  // {n}, {n,}, {n,m} at pos_; false (pos_ unchanged) when the text is not one (then JavaScript
  // reads '{' as a literal).
  bool braces(long& min, long& max) {
    size_t p = pos_ + 1;
    auto number = [&](long& value) {
      const size_t start = p;
      value = 0;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') {
        if (value <= kMaxRepetitionCount) value = value * 10 + (text_[p] - '0');
        ++p;
      }
      return p > start;
    };
    if (!number(min)) return false;
    max = min;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      if (!number(max)) max = -1;
    }
    if (p >= text_.size() || text_[p] != '}') return false;
    pos_ = p + 1;
    return true;
  }

  Piece quantified(Piece atom) {
    long min = 1, max = 1;
    if (eat('*')) {
      min = 0;
      max = -1;
    } else if (eat('+')) {
      max = -1;
    } else if (eat('?')) {
      min = 0;
    } else if (peek() == '{' && braces(min, max)) {
    } else {
      return atom;
    }
    eat('?');  // lazy: the same strings
    if (peek() == '*' || peek() == '+' || peek() == '?' || (peek() == '{' && [&] {
          const size_t at = pos_;
          long a, b;
          const bool is = braces(a, b);
          pos_ = at;
          return is;
        }()))
      fail("a repeat of a repeat (nothing to repeat)");
    if (min > kMaxRepetitionCount || max > kMaxRepetitionCount)
      fail(fmt::format("repeat count over {} (the limit, kMaxRepetitionCount)", kMaxRepetitionCount));
    if (max >= 0 && max < min) fail("repeat {n,m} with m < n");
    if (max == 0 || atom.gbnf.empty()) return Piece{};
    if (min == 1 && max == 1) return atom;
    Piece out;
    out.nullable = min == 0 || atom.nullable;
    out.min_length = atom.min_length * static_cast<uint64_t>(min);  // both bounded by the limits
    out.max_length =
        (max < 0 || atom.max_length == kUnbounded) ? kUnbounded : atom.max_length * static_cast<uint64_t>(max);
    const uint64_t copies = max < 0 ? 1 : static_cast<uint64_t>(std::max(1L, max - min));
    out.expanded = atom.expanded * copies;
    out.elements = (atom.elements + 2) * static_cast<uint64_t>(max < 0 ? std::max(min, 1L) + 1 : max);
    std::string suffix;
    if (min == 0 && max < 0) {
      suffix = "*";
    } else if (min == 1 && max < 0) {
      suffix = "+";
    } else if (min == 0 && max == 1) {
      suffix = "?";
    } else if (max < 0) {
      suffix = fmt::format("{{{},}}", min);
    } else if (min == max) {
      suffix = fmt::format("{{{}}}", min);
    } else {
      suffix = fmt::format("{{{},{}}}", min, max);
    }
    out.gbnf = "(" + atom.gbnf + ")" + suffix;
    check_limits(out);
    // GBNF refuses (as left recursion) a repeat of what can be empty; such a repeat is also
    // ambiguous at every character. Limits first, so that a bomb is named as one.
    if (atom.nullable && max != min)
      fail("a repeated part that can match the empty string is not supported (write it without the empty option)");
    return out;
  }

  Piece atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (eat('?')) {
        if (eat(':')) {
        } else if (peek() == '=' || peek() == '!') {
          fail("lookahead ('(?=' / '(?!') is not supported: it cannot be written as a grammar here");
        } else if (peek() == '<' && (peek(1) == '=' || peek(1) == '!')) {
          fail("lookbehind ('(?<=' / '(?<!') is not supported: it cannot be written as a grammar here");
        } else if (eat('<')) {
          while (!at_end() && peek() != '>') ++pos_;
          if (!eat('>')) fail("unterminated group name");
        } else {
          fail("inline flags or other '(?' groups are not supported");
        }
      }
      Piece inner = alternation(depth + 1);
      if (!eat(')')) fail("missing ')'");
      if (!inner.gbnf.empty()) inner.gbnf = "(" + inner.gbnf + ")";
      return inner;
    }
    if (c == '[') return set_piece(char_class());
    if (c == '.') {
      ++pos_;
      return set_piece(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '*' || c == '+' || c == '?') fail(fmt::format("nothing to repeat before '{}'", c));
    if (c == '{') {
      const size_t at = pos_;
      long a, b;
      if (braces(a, b)) {
        pos_ = at;
        fail("nothing to repeat before '{'");
      }
    }
    if (c == '\\') return set_piece(escape(false));
    const uint32_t cp = next_code_point();
    return set_piece({{cp, cp}});
  }

  static Ranges digit() { return {{'0', '9'}}; }
  static Ranges word() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
  static Ranges space() {  // ECMAScript's \s: white space and line terminators
    return {{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
            {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  }

  uint32_t hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d;
      if (h >= '0' && h <= '9') {
        d = h - '0';
      } else if (h >= 'a' && h <= 'f') {
        d = h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        d = h - 'A' + 10;
      } else {
        fail(fmt::format("expected {} hex digits", digits));
      }
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  uint32_t unicode_escape() {  // after "\u"
    uint32_t cp;
    if (eat('{')) {
      cp = 0;
      size_t n = 0;
      while (!at_end() && peek() != '}' && n < 7) {
        cp = cp * 16 + hex(1);
        ++n;
      }
      if (!eat('}') || n == 0) fail("malformed \\u{...}");
    } else {
      cp = hex(4);
      if (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
        pos_ += 2;
        const uint32_t low = hex(4);
        if (low < 0xDC00 || low > 0xDFFF) fail("a high surrogate not followed by a low one");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      }
    }
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail(fmt::format("U+{:X} is not a character", cp));
    return cp;
  }

  // One escape after '\'; a set (one code point or a class).
  Ranges escape(bool in_class) {
    ++pos_;
    if (at_end()) fail("the pattern ends in '\\'");
    const char c = peek();
    ++pos_;
    auto one = [](uint32_t cp) { return Ranges{{cp, cp}}; };
    switch (c) {
      case 'd': return digit();
      case 'D': return complement(digit());
      case 'w': return word();
      case 'W': return complement(word());
      case 's': return space();
      case 'S': return complement(space());
      case 't': return one('\t');
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0':
        if (peek() >= '0' && peek() <= '9') fail("octal escapes are not supported");
        return one(0);
      case 'x': return one(hex(2));
      case 'u': return one(unicode_escape());
      case 'c': {
        const char l = peek();
        if (!((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z'))) fail("'\\c' must be followed by a letter");
        ++pos_;
        return one(static_cast<uint32_t>(l) & 0x1F);
      }
      case 'b':
        if (in_class) return one('\b');
        fail("the word boundary '\\b' is not supported");
      case 'B': fail("the non-word boundary '\\B' is not supported");
      case 'p':
      case 'P': fail("Unicode property classes ('\\p{...}') are not supported");
      case 'k':
        if (peek() == '<') fail("backreferences ('\\k<name>') are not regular and not supported");
        return one('k');
      default:
        if (c >= '1' && c <= '9') {
          if (in_class) fail("octal escapes are not supported");
          fail(fmt::format("backreferences ('\\{}') are not regular and not supported", c));
        }
        --pos_;
        return one(next_code_point());  // an escaped character stands for itself
    }
  }

  Ranges char_class() {
    ++pos_;  // '['
    const bool negate = eat('^');
    Ranges ranges;
    while (true) {
      if (at_end()) fail("unterminated character class, expected ']'");
      if (eat(']')) break;
      auto item = [&]() -> Ranges {
        if (peek() == '\\') return escape(true);
        const uint32_t cp = next_code_point();
        return {{cp, cp}};
      };
      const Ranges lo = item();
      const bool single = lo.size() == 1 && lo[0].first == lo[0].second;
      if (single && peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        const Ranges hi = item();
        if (hi.size() != 1 || hi[0].first != hi[0].second) fail("a class escape (\\d, \\w, \\s) cannot end a range");
        const uint32_t hi_cp = hi[0].first;
        if (hi_cp < lo[0].first) fail("character range is backwards");
        ranges.emplace_back(lo[0].first, hi_cp);
        continue;
      }
      ranges.insert(ranges.end(), lo.begin(), lo.end());
    }
    return negate ? complement(ranges) : normalized(ranges);
  }

  std::string_view text_;
  RegexGrammarOptions options_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace

std::string regex_to_gbnf(std::string_view pattern, const RegexGrammarOptions& options, const std::string& what,
                          RegexLengths* lengths) {
  return RegexCompiler(pattern, options, what).compile(lengths);
}

}  // namespace tandem::grammar
