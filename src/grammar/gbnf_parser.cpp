// GBNF text to GrammarBuilder calls, by recursive descent. An item (literal, class, group,
// reference) is parsed to a sequence of elements; a postfix operator needs it as one element,
// so a longer sequence is wrapped in a helper rule first.
#include "grammar/gbnf_parser.h"

#include <optional>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "grammar/grammar_limits.h"
#include "grammar/utf8_ranges.h"

namespace tandem::grammar {
namespace {

// Group nesting, so recursion depth is bounded for the fuzzer.
constexpr int kMaxDepth = 200;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

void append_utf8(uint32_t cp, std::vector<GrammarElement>& out) {
  uint8_t bytes[4];
  int n;
  if (cp < 0x80) {
    bytes[0] = static_cast<uint8_t>(cp);
    n = 1;
  } else if (cp < 0x800) {
    bytes[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    bytes[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    bytes[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    bytes[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    bytes[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    bytes[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
    bytes[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
    bytes[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    bytes[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    n = 4;
  }
  for (int i = 0; i < n; ++i) out.push_back(GrammarElement::byte(bytes[i]));
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Grammar parse(std::string_view root) {
    skip_space();
    while (pos_ < text_.size()) {
      parse_rule();
      skip_space();
    }
    for (const auto& [rule, where] : first_use_) {
      if (!builder_.has_alternatives(rule)) {
        pos_ = where;
        fail(fmt::format("rule '{}' is used but never defined", builder_.rule_name(rule)));
      }
    }
    return builder_.build(root);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    if (rule_name_.empty()) throw InputError(fmt::format("grammar: line {}, column {}: {}", line, column, message));
    throw InputError(fmt::format("grammar: line {}, column {} (rule '{}'): {}", line, column, rule_name_, message));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  // Spaces, tabs, newlines and # comments.
  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start)
      fail(at_end() ? "expected a rule name, got the end of the grammar"
                    : fmt::format("expected a rule name, got '{}'", peek()));
    return text_.substr(start, pos_ - start);
  }

  // True when a rule definition (`name ::=`) starts at the current position.
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' || text_[p] == '\r')) ++p;
    return text_.substr(p, 3) == "::=";
  }

  void parse_rule() {
    rule_name_.clear();
    const size_t name_at = pos_;
    const std::string name(parse_name());
    rule_name_ = name;
    skip_space();
    if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name");
    pos_ += 3;
    const uint32_t rule = builder_.rule(name);
    if (builder_.has_alternatives(rule) || defined_.contains(rule)) {
      pos_ = name_at;
      fail("rule defined twice");
    }
    defined_.emplace(rule, name_at);
    skip_space();
    parse_alternatives(rule, 0);
  }

  // Alternatives separated by '|' into `rule`, up to ')' (depth > 0) or the next rule.
  void parse_alternatives(uint32_t rule, int depth) {
    if (depth > kMaxDepth) fail("groups nested too deeply");
    while (true) {
      std::vector<GrammarElement> sequence = parse_sequence(depth);
      count(sequence.size() + 1);
      builder_.add_alternative(rule, std::move(sequence));
      if (peek() != '|') break;
      ++pos_;
      skip_space();
    }
  }

  std::vector<GrammarElement> parse_sequence(int depth) {
    std::vector<GrammarElement> sequence;
    while (!at_end()) {
      const char c = peek();
      if (c == '|' || c == ')') break;
      if (is_name_char(c) && at_rule_start()) break;
      std::vector<GrammarElement> item = parse_item(depth);
      skip_space();
      item = parse_postfix(std::move(item));
      sequence.insert(sequence.end(), item.begin(), item.end());
      skip_space();
    }
    if (depth > 0 && at_end()) fail("expected ')' before the end of the grammar");
    return sequence;
  }

  std::vector<GrammarElement> parse_item(int depth) {
    const char c = peek();
    std::vector<GrammarElement> out;
    if (c == '"') {
      ++pos_;
      while (true) {
        if (at_end()) fail("unterminated string literal");
        const char d = peek();
        if (d == '"') break;
        if (d == '\n') fail("newline inside a string literal");
        if (d == '\\') {
          append_utf8(parse_escape(), out);
        } else {
          out.push_back(GrammarElement::byte(static_cast<uint8_t>(d)));
          ++pos_;
        }
      }
      ++pos_;
    } else if (c == '[') {
      out.push_back(parse_class());
    } else if (c == '.') {
      ++pos_;
      out.push_back(GrammarElement::ref(any_char()));
    } else if (c == '(') {
      ++pos_;
      skip_space();
      const uint32_t group = builder_.fresh_rule(rule_name_);
      parse_alternatives(group, depth + 1);
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      out.push_back(GrammarElement::ref(group));
    } else if (is_name_char(c)) {
      const size_t at = pos_;
      const uint32_t rule = builder_.rule(parse_name());
      first_use_.try_emplace(rule, at);
      out.push_back(GrammarElement::ref(rule));
    } else {
      fail(fmt::format("unexpected '{}'", c));
    }
    return out;
  }

  // One escape after a backslash, as a code point.
  uint32_t parse_escape() {
    ++pos_;  // the backslash
    if (at_end()) fail("unterminated escape");
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '0': return 0;
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/':
      case '.': return static_cast<uint8_t>(c);
      case 'x': return parse_hex(2);
      case 'u': return parse_hex(4);
      case 'U': return parse_hex(8);
      default: --pos_; fail(fmt::format("unknown escape '\\{}'", c));
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = peek();
      int v;
      if (c >= '0' && c <= '9')
        v = c - '0';
      else if (c >= 'a' && c <= 'f')
        v = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        v = c - 'A' + 10;
      else
        fail(fmt::format("expected {} hex digits", digits));
      value = value * 16 + static_cast<uint32_t>(v);
      ++pos_;
    }
    if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF))
      fail(fmt::format("U+{:X} is not a character", value));
    return value;
  }

  // One code point of a class: an escape or a raw UTF-8 character.
  uint32_t parse_class_char() {
    if (peek() == '\\') return parse_escape();
    const auto lead = static_cast<uint8_t>(peek());
    const int n = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > text_.size()) fail("invalid UTF-8 in a character class");
    uint32_t cp = n == 1 ? lead : lead & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const auto b = static_cast<uint8_t>(text_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8 in a character class");
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[n] || cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) {
      fail("invalid UTF-8 in a character class");
    }
    pos_ += static_cast<size_t>(n);
    return cp;
  }

  GrammarElement parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CodePointRange> ranges;
    while (true) {
      if (at_end()) fail("unterminated character class, expected ']'");
      if (peek() == ']') break;
      const uint32_t lo = parse_class_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
        ++pos_;
        hi = parse_class_char();
        if (hi < lo) fail("character range is backwards");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    return code_points(normalize_ranges(std::move(ranges), negate));
  }

  // One element matching exactly one of the code points in `ranges` (normalized).
  GrammarElement code_points(const std::vector<CodePointRange>& ranges) {
    std::vector<std::vector<ByteRange>> sequences;
    for (CodePointRange r : ranges) {
      for (auto& s : utf8_sequences(r)) sequences.push_back(std::move(s));
    }
    if (sequences.size() == 1 && sequences[0].size() == 1) {
      return GrammarElement::bytes(sequences[0][0].first, sequences[0][0].second);
    }
    const uint32_t rule = builder_.fresh_rule(rule_name_.empty() ? "class" : rule_name_);
    // An empty class ([^\x00-\U0010FFFF]) matches nothing: a rule that can never finish,
    // which the builder reports.
    if (sequences.empty()) builder_.add_alternative(rule, {GrammarElement::ref(rule)});
    for (const auto& s : sequences) {
      std::vector<GrammarElement> alt;
      for (auto [lo, hi] : s) alt.push_back(GrammarElement::bytes(lo, hi));
      count(alt.size() + 1);
      builder_.add_alternative(rule, std::move(alt));
    }
    return GrammarElement::ref(rule);
  }

  uint32_t any_char() {
    if (!any_char_) {
      const std::string saved = rule_name_;
      rule_name_ = "any-char";
      const GrammarElement e = code_points(normalize_ranges({{0, kMaxCodePoint}}, false));
      any_char_ = e.rule;
      rule_name_ = saved;
    }
    return *any_char_;
  }

  long parse_count() {
    const size_t start = pos_;
    long value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + (peek() - '0');
      if (value > kMaxRepetitionCount) fail(fmt::format("repetition count over {}", kMaxRepetitionCount));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in '{m,n}'");
    return value;
  }

  std::vector<GrammarElement> parse_postfix(std::vector<GrammarElement> item) {
    const char c = peek();
    long min = 0, max = -1;  // max -1: unbounded
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      min = 1;
    } else if (c == '?') {
      ++pos_;
      max = 1;
    } else if (c == '{') {
      ++pos_;
      skip_space();
      min = parse_count();
      skip_space();
      max = min;
      if (peek() == ',') {
        ++pos_;
        skip_space();
        max = (peek() >= '0' && peek() <= '9') ? parse_count() : -1;
        skip_space();
      }
      if (peek() != '}') fail("expected '}'");
      ++pos_;
      if (max >= 0 && max < min) fail("repetition {m,n} with n < m");
    } else {
      return item;
    }
    skip_space();
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')
      fail("repetition of a repetition: use a group");
    return repeat(unit(std::move(item)), min, max);
  }

  // `item` as one element (a helper rule when it is longer).
  GrammarElement unit(std::vector<GrammarElement> item) {
    if (item.size() == 1) return item[0];
    const uint32_t rule = builder_.fresh_rule(rule_name_);
    count(item.size() + 1);
    builder_.add_alternative(rule, std::move(item));
    return GrammarElement::ref(rule);
  }

  std::vector<GrammarElement> repeat(GrammarElement x, long min, long max) {
    count(static_cast<size_t>(min) + 3 * static_cast<size_t>(max > min ? max - min : 1) + 4);
    std::vector<GrammarElement> out(static_cast<size_t>(min), x);
    if (max < 0) {
      // star ::= x star | ""
      const uint32_t star = builder_.fresh_rule(rule_name_);
      builder_.add_alternative(star, {x, GrammarElement::ref(star)});
      builder_.add_alternative(star, {});
      out.push_back(GrammarElement::ref(star));
    } else if (max > min) {
      if (builder_.n_rules() + static_cast<size_t>(max - min) > kMaxGrammarRules)
        fail(fmt::format("the grammar passes the limit of {} rules after lowering", kMaxGrammarRules));
      // opt_1 ::= x | "", opt_k ::= x opt_{k-1} | "": up to max - min more.
      uint32_t previous = 0;
      for (long k = 1; k <= max - min; ++k) {
        const uint32_t opt = builder_.fresh_rule(rule_name_);
        if (k == 1) {
          builder_.add_alternative(opt, {x});
        } else {
          builder_.add_alternative(opt, {x, GrammarElement::ref(previous)});
        }
        builder_.add_alternative(opt, {});
        previous = opt;
      }
      builder_.note_repetition(previous, static_cast<uint64_t>(max - min), x, rule_name_);
      out.push_back(GrammarElement::ref(previous));
    }
    return out;
  }

  void count(size_t n) {
    n_elements_ += n;
    if (n_elements_ > kMaxGrammarElements)
      fail(fmt::format("the grammar passes the limit of {} elements after lowering", kMaxGrammarElements));
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string rule_name_;
  GrammarBuilder builder_;
  std::unordered_map<uint32_t, size_t> first_use_;  // rule -> offset of its first reference
  std::unordered_map<uint32_t, size_t> defined_;    // rule -> offset of its definition
  std::optional<uint32_t> any_char_;
  size_t n_elements_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, std::string_view root) {
  TANDEM_CHECK_INPUT(text.size() <= kMaxGrammarTextBytes, "grammar: {} bytes of text (the limit is {})", text.size(),
                     kMaxGrammarTextBytes);
  return Parser(text).parse(root);
}

}  // namespace tandem::grammar
