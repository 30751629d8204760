// Decimal ranges as GBNF. A range of same-length digit strings [a, b] is: a's first digit then
// "at least a's rest", or a digit strictly between then anything, or b's first digit then "at
// most b's rest" — each of those again a range with one side open, so the expression has at
// most three alternatives per digit position. Fractions are ranges over digit strings compared
// as fractions (".5" > ".49"), built the same way one digit at a time.
#include "grammar/number_range.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"

namespace tandem::grammar {
namespace {

bool all_of_digit(std::string_view s, char d) {
  return std::all_of(s.begin(), s.end(), [d](char c) { return c == d; });
}

// Unsigned digit strings without leading zeros.
int compare_uint(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a < b ? -1 : (a == b ? 0 : 1);
}

std::string plus_one(std::string s) {
  size_t i = s.size();
  while (i > 0 && s[i - 1] == '9') s[--i] = '0';
  if (i == 0) return "1" + s;
  ++s[i - 1];
  return s;
}

std::string minus_one(std::string s) {  // s > 0
  size_t i = s.size();
  while (s[i - 1] == '0') s[--i] = '9';
  --s[i - 1];
  if (s.size() > 1 && s[0] == '0') s.erase(0, 1);
  return s;
}

std::string lit(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  out += s;
  out += '"';
  return out;
}

std::string digit_class(char lo, char hi) {
  return lo == hi ? lit(std::string(1, lo)) : fmt::format("[{}-{}]", lo, hi);
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : fmt::format("[0-9]{{{}}}", n);
}

std::string seq(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

std::string alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) {
    if (i > 0) out += " | ";
    out += alts[i].empty() ? std::string("\"\"") : alts[i];
  }
  return out + ")";
}

// Same-length digit strings >= s / <= s.
std::string at_least(std::string_view s) {
  if (s.empty() || all_of_digit(s, '0')) return any_digits(s.size());
  std::vector<std::string> alts{seq(lit(s.substr(0, 1)), at_least(s.substr(1)))};
  if (s[0] < '9') alts.push_back(seq(digit_class(static_cast<char>(s[0] + 1), '9'), any_digits(s.size() - 1)));
  return alternatives(alts);
}

std::string at_most(std::string_view s) {
  if (s.empty() || all_of_digit(s, '9')) return any_digits(s.size());
  std::vector<std::string> alts{seq(lit(s.substr(0, 1)), at_most(s.substr(1)))};
  if (s[0] > '0') alts.push_back(seq(digit_class('0', static_cast<char>(s[0] - 1)), any_digits(s.size() - 1)));
  return alternatives(alts);
}

// Same-length digit strings in [a, b], a <= b.
std::string same_length_range(std::string_view a, std::string_view b) {
  if (a.empty()) return "";
  if (a[0] == b[0]) return seq(lit(a.substr(0, 1)), same_length_range(a.substr(1), b.substr(1)));
  if (all_of_digit(a.substr(1), '0') && all_of_digit(b.substr(1), '9'))
    return seq(digit_class(a[0], b[0]), any_digits(a.size() - 1));
  std::vector<std::string> alts{seq(lit(a.substr(0, 1)), at_least(a.substr(1)))};
  if (b[0] - a[0] >= 2)
    alts.push_back(
        seq(digit_class(static_cast<char>(a[0] + 1), static_cast<char>(b[0] - 1)), any_digits(a.size() - 1)));
  alts.push_back(seq(lit(b.substr(0, 1)), at_most(b.substr(1))));
  return alternatives(alts);
}

// Unsigned integers without leading zeros in [a, b], a <= b.
std::string uint_range(const std::string& a, const std::string& b) {
  if (a.size() == b.size()) return same_length_range(a, b);
  std::vector<std::string> alts{same_length_range(a, std::string(a.size(), '9'))};
  // Lengths strictly between: a non-zero digit, then la..lb-2 more.
  if (b.size() - a.size() >= 2) {
    const size_t lo = a.size(), hi = b.size() - 2;
    alts.push_back(lo == hi ? fmt::format("[1-9] [0-9]{{{}}}", lo) : fmt::format("[1-9] [0-9]{{{},{}}}", lo, hi));
  }
  alts.push_back(same_length_range("1" + std::string(b.size() - 1, '0'), b));
  return alternatives(alts);
}

Decimal negated(Decimal d) {
  if (!d.is_zero()) d.negative = !d.negative;
  return d;
}

Decimal integer(bool negative, std::string digits) {
  Decimal d;
  d.int_digits = std::move(digits);
  d.negative = negative && d.int_digits != "0";
  return d;
}

Decimal next_integer(const Decimal& d) {  // d an integer
  if (d.negative) return integer(true, minus_one(d.int_digits));
  return integer(false, plus_one(d.int_digits));
}

Decimal previous_integer(const Decimal& d) {
  if (d.negative || d.is_zero()) return integer(true, plus_one(d.int_digits));
  return integer(false, minus_one(d.int_digits));
}

Decimal floor_of(const Decimal& d) {
  if (d.is_integer()) return d;
  return d.negative ? integer(true, plus_one(d.int_digits)) : integer(false, d.int_digits);
}

Decimal ceil_of(const Decimal& d) {
  if (d.is_integer()) return d;
  return d.negative ? integer(true, d.int_digits) : integer(false, plus_one(d.int_digits));
}

// Fraction digit strings t (at most `room` digits; "" is the value 0) with c <= t (c < t when
// c_exclusive) and, when given, t <= d (t < d). Split into the non-empty strings' expression
// and whether "" belongs.
struct Fractions {
  std::optional<std::string> non_empty;
  bool empty = false;
};

Fractions fractions(std::string_view c, bool c_exclusive, std::optional<std::string_view> d, bool d_exclusive,
                    size_t room) {
  Fractions out;
  const bool c_zero = all_of_digit(c, '0');
  out.empty = !c_exclusive && c_zero && (!d || !d_exclusive || !all_of_digit(*d, '0'));
  if (room == 0) return out;
  if (c_zero && !c_exclusive && !d) {
    out.non_empty = room == 1 ? "[0-9]" : fmt::format("[0-9]{{1,{}}}", room);
    return out;
  }
  if (d && all_of_digit(*d, '0')) {  // t <= 0: only zeros, and only when c allows 0
    if (!d_exclusive && c_zero && !c_exclusive) out.non_empty = fmt::format("\"0\"{{1,{}}}", room);
    return out;
  }
  const char c0 = c.empty() ? '0' : c[0];
  const std::string_view c_rest = c.empty() ? c : c.substr(1);
  const char top = d ? (*d)[0] : static_cast<char>('9' + 1);
  std::vector<std::string> alts;
  auto prefixed = [&](char digit, const Fractions& rest) {
    const std::string head = lit(std::string(1, digit));
    if (!rest.non_empty) {
      if (rest.empty) alts.push_back(head);
      return;
    }
    alts.push_back(rest.empty ? head + " (" + *rest.non_empty + ")?" : seq(head, *rest.non_empty));
  };
  if (c0 == top) {
    prefixed(c0, fractions(c_rest, c_exclusive, d->substr(1), d_exclusive, room - 1));
  } else {
    prefixed(c0, fractions(c_rest, c_exclusive, std::nullopt, false, room - 1));
    if (top - c0 >= 2) {
      const std::string rest = room == 1 ? "" : room == 2 ? "[0-9]?" : fmt::format("[0-9]{{0,{}}}", room - 1);
      alts.push_back(seq(digit_class(static_cast<char>(c0 + 1), static_cast<char>(top - 1)), rest));
    }
    if (d) prefixed(top, fractions("", false, d->substr(1), d_exclusive, room - 1));
  }
  if (!alts.empty()) out.non_empty = alternatives(alts);
  return out;
}

// "" or "." and digits, as `f` allows; nullopt when it allows nothing.
std::optional<std::string> fraction_part(const Fractions& f) {
  if (!f.non_empty) return f.empty ? std::optional<std::string>("") : std::nullopt;
  return f.empty ? "(\".\" " + *f.non_empty + ")?" : "\".\" " + *f.non_empty;
}

struct Magnitude {
  Decimal value;  // non-negative
  bool exclusive = false;
};

// Non-negative numbers in plain decimal between lower and (when given) upper.
std::optional<std::string> magnitude_range(const Magnitude& lower, const std::optional<Magnitude>& upper,
                                           size_t fraction_digits, const std::string& cap) {
  std::vector<std::string> alts;
  auto add = [&](const std::string& int_part, const Fractions& f) {
    if (std::optional<std::string> frac = fraction_part(f)) alts.push_back(seq(int_part, *frac));
  };
  const std::string& li = lower.value.int_digits;
  if (upper && li == upper->value.int_digits) {
    add(lit(li), fractions(lower.value.frac_digits, lower.exclusive, upper->value.frac_digits, upper->exclusive,
                           fraction_digits));
  } else {
    add(lit(li), fractions(lower.value.frac_digits, lower.exclusive, std::nullopt, false, fraction_digits));
    const std::string lo = plus_one(li);
    const std::string hi = upper ? (upper->value.int_digits == "0" ? "" : minus_one(upper->value.int_digits)) : cap;
    if (!hi.empty() && compare_uint(lo, hi) <= 0)
      add(uint_range(lo, hi), fractions("", false, std::nullopt, false, fraction_digits));
    if (upper)
      add(lit(upper->value.int_digits),
          fractions("", false, upper->value.frac_digits, upper->exclusive, fraction_digits));
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

std::string digits_cap(const std::optional<Bound>& min, const std::optional<Bound>& max) {
  size_t n = kDefaultIntegerDigits;
  if (min) n = std::max(n, min->value.int_digits.size());
  if (max) n = std::max(n, max->value.int_digits.size());
  return std::string(n, '9');
}

}  // namespace

std::string Decimal::text() const {
  return (negative ? "-" : "") + int_digits + (frac_digits.empty() ? "" : "." + frac_digits);
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  int c = compare_uint(a.int_digits, b.int_digits);
  if (c == 0) {
    const size_t n = std::max(a.frac_digits.size(), b.frac_digits.size());
    std::string fa = a.frac_digits, fb = b.frac_digits;
    fa.resize(n, '0');
    fb.resize(n, '0');
    c = fa < fb ? -1 : (fa == fb ? 0 : 1);
  }
  return a.negative ? -c : c;
}

Decimal decimal_of(const nlohmann::ordered_json& number, const std::string& what) {
  TANDEM_CHECK_INPUT(number.is_number(), "json schema: {} must be a number", what);
  std::string text;
  if (number.is_number_unsigned()) {
    text = std::to_string(number.get<uint64_t>());
  } else if (number.is_number_integer()) {
    text = std::to_string(number.get<int64_t>());
  } else {
    const double v = number.get<double>();
    TANDEM_CHECK_INPUT(std::isfinite(v), "json schema: {} must be finite", what);
    text = fmt::format("{}", v);  // shortest text that reads back as v
  }
  Decimal d;
  size_t i = 0;
  if (text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;
  long point = -1;
  for (; i < text.size() && text[i] != 'e' && text[i] != 'E'; ++i) {
    if (text[i] == '.') {
      point = static_cast<long>(digits.size());
    } else {
      digits += text[i];
    }
  }
  if (point < 0) point = static_cast<long>(digits.size());
  if (i < text.size()) {
    long exponent = 0;
    const char* first = text.data() + i + 1;
    if (*first == '+') ++first;
    std::from_chars(first, text.data() + text.size(), exponent);
    point += exponent;
  }
  const long limit = static_cast<long>(kMaxBoundDigits);
  TANDEM_CHECK_INPUT(point <= limit && point >= -limit,
                     "json schema: {} ({}) has more than {} digits (the limit on a bound's digits)", what, text,
                     kMaxBoundDigits);
  if (point <= 0) {
    digits = std::string(static_cast<size_t>(-point), '0') + digits;
    point = 0;
  } else if (static_cast<size_t>(point) > digits.size()) {
    digits += std::string(static_cast<size_t>(point) - digits.size(), '0');
  }
  d.int_digits = digits.substr(0, static_cast<size_t>(point));
  d.frac_digits = digits.substr(static_cast<size_t>(point));
  d.int_digits.erase(0, std::min(d.int_digits.find_first_not_of('0'), d.int_digits.size()));
  if (d.int_digits.empty()) d.int_digits = "0";
  while (!d.frac_digits.empty() && d.frac_digits.back() == '0') d.frac_digits.pop_back();
  TANDEM_CHECK_INPUT(d.int_digits.size() + d.frac_digits.size() <= kMaxBoundDigits,
                     "json schema: {} ({}) has more than {} digits (the limit on a bound's digits)", what, text,
                     kMaxBoundDigits);
  if (d.is_zero()) d.negative = false;
  return d;
}

std::optional<std::string> integer_range_gbnf(const std::optional<Bound>& min, const std::optional<Bound>& max) {
  std::optional<Decimal> lo, hi;
  if (min) lo = min->exclusive ? next_integer(floor_of(min->value)) : ceil_of(min->value);
  if (max) hi = max->exclusive ? previous_integer(ceil_of(max->value)) : floor_of(max->value);
  if (lo && hi && compare(*lo, *hi) > 0) return std::nullopt;
  const std::string cap = digits_cap(min, max);
  std::vector<std::string> alts;
  if (!lo || lo->negative) {  // negative integers: "-" then magnitudes
    const std::string m_lo = hi && hi->negative ? hi->int_digits : "1";
    const std::string m_hi = lo ? lo->int_digits : cap;
    if (compare_uint(m_lo, m_hi) <= 0) alts.push_back("\"-\" " + uint_range(m_lo, m_hi));
  }
  if (!hi || !hi->negative) {
    const std::string a = !lo || lo->negative ? "0" : lo->int_digits;
    const std::string b = hi ? hi->int_digits : cap;
    if (compare_uint(a, b) <= 0) alts.push_back(uint_range(a, b));
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

std::optional<std::string> number_range_gbnf(const std::optional<Bound>& min, const std::optional<Bound>& max,
                                             size_t fraction_digits) {
  if (min && max) {
    const int c = compare(min->value, max->value);
    if (c > 0 || (c == 0 && (min->exclusive || max->exclusive))) return std::nullopt;
  }
  const std::string cap = digits_cap(min, max);
  std::vector<std::string> alts;
  if (!min || min->value.negative) {  // negative numbers: "-" then magnitudes above 0
    const Magnitude lower =
        max && max->value.negative ? Magnitude{negated(max->value), max->exclusive} : Magnitude{Decimal{}, true};
    std::optional<Magnitude> upper;
    if (min) upper = Magnitude{negated(min->value), min->exclusive};
    if (std::optional<std::string> m = magnitude_range(lower, upper, fraction_digits, cap))
      alts.push_back("\"-\" " + *m);
  }
  if (!max || !max->value.negative) {
    if (!(max && max->value.is_zero() && max->exclusive)) {
      const Magnitude lower = !min || min->value.negative ? Magnitude{} : Magnitude{min->value, min->exclusive};
      std::optional<Magnitude> upper;
      if (max) upper = Magnitude{max->value, max->exclusive};
      if (std::optional<std::string> m = magnitude_range(lower, upper, fraction_digits, cap)) alts.push_back(*m);
    }
  }
  if (alts.empty()) return std::nullopt;
  return alternatives(alts);
}

std::string integer_multiple_gbnf(const std::string& k_digits, const std::string& prefix, std::string& rules,
                                  size_t n_digits, IntegerSigns signs) {
  const std::string zero = signs == IntegerSigns::kPositive ? "" : "\"0\" | ";
  const std::string minus = signs == IntegerSigns::kAll ? "\"-\"? " : "";
  const size_t zeros = k_digits.size() - 1;
  if (k_digits[0] == '1' && all_of_digit(std::string_view(k_digits).substr(1), '0')) {
    // 10^j: a non-zero number ending in j zeros.
    if (zeros >= n_digits) return signs == IntegerSigns::kPositive ? "" : "\"0\"";
    const size_t free = n_digits - 1 - zeros;
    return fmt::format("({}{}[1-9] [0-9]{{0,{}}} \"{}\")", zero, minus, free, std::string(zeros, '0'));
  }
  TANDEM_CHECK_INPUT(k_digits.size() <= 3 && std::stoll(k_digits) <= kMaxIntegerMultipleOf,
                     "json schema: integer 'multipleOf' {} is over {} (the limit, kMaxIntegerMultipleOf: one grammar "
                     "rule per remainder and digit) and not a power of ten",
                     k_digits, kMaxIntegerMultipleOf);
  const int64_t k = std::stoll(k_digits);
  // viable[n][r]: with remainder r and up to n more digits, a multiple can still be reached.
  std::vector<std::vector<bool>> viable(n_digits, std::vector<bool>(static_cast<size_t>(k), false));
  viable[0][0] = true;
  for (size_t n = 1; n < n_digits; ++n) {
    for (int64_t r = 0; r < k; ++r) {
      bool ok = r == 0;
      for (int d = 0; d < 10 && !ok; ++d) ok = viable[n - 1][static_cast<size_t>((10 * r + d) % k)];
      viable[n][static_cast<size_t>(r)] = ok;
    }
  }
  auto name = [&](size_t n, int64_t r) { return fmt::format("{}-{}-{}", prefix, n, r); };
  // Digits from remainder r leading to each viable next state, grouped by that state.
  auto steps = [&](size_t n, int64_t r, char first_digit) {
    std::vector<std::string> alts;
    std::vector<std::string> by_next(static_cast<size_t>(k));
    for (int d = first_digit - '0'; d < 10; ++d) {
      const int64_t next = (10 * r + d) % k;
      if (viable[n][static_cast<size_t>(next)]) by_next[static_cast<size_t>(next)] += static_cast<char>('0' + d);
    }
    for (int64_t next = 0; next < k; ++next) {
      const std::string& ds = by_next[static_cast<size_t>(next)];
      if (ds.empty()) continue;
      const std::string cls = ds.size() == 1 ? lit(ds) : "[" + ds + "]";
      alts.push_back(n == 0 && next == 0 ? cls : cls + " " + name(n, next));
    }
    return alts;
  };
  for (size_t n = 1; n < n_digits; ++n) {
    for (int64_t r = 0; r < k; ++r) {
      if (!viable[n][static_cast<size_t>(r)]) continue;
      std::vector<std::string> alts = steps(n - 1, r, '0');
      if (r == 0) alts.insert(alts.begin(), "\"\"");
      std::string body;
      for (size_t i = 0; i < alts.size(); ++i) {
        if (i > 0) body += " | ";
        body += alts[i];
      }
      rules += name(n, r) + " ::= " + body + "\n";
    }
  }
  // "0", or an optional sign and a first digit 1-9 (no leading zeros, no "-0").
  std::vector<std::string> first = steps(n_digits - 1, 0, '1');
  if (first.empty()) return signs == IntegerSigns::kPositive ? "" : "\"0\"";
  std::string body;
  for (size_t i = 0; i < first.size(); ++i) {
    if (i > 0) body += " | ";
    body += first[i];
  }
  return "(" + zero + minus + "(" + body + "))";
}

std::optional<std::string> integer_multiple_in_range_gbnf(const std::string& k_digits, const std::string& prefix,
                                                          std::string& rules, const std::optional<Bound>& min,
                                                          const std::optional<Bound>& max) {
  std::optional<Decimal> lo, hi;
  if (min) lo = min->exclusive ? next_integer(floor_of(min->value)) : ceil_of(min->value);
  if (max) hi = max->exclusive ? previous_integer(ceil_of(max->value)) : floor_of(max->value);
  // The digits every number of that many digits stays within: 999 <= hi gives 3.
  auto digits_within = [](const std::string& magnitude) {
    return all_of_digit(magnitude, '9') ? magnitude.size() : magnitude.size() - 1;
  };
  size_t n_digits = kDefaultIntegerDigits;
  IntegerSigns signs = IntegerSigns::kAll;
  if (hi) {
    if (hi->negative) return std::nullopt;
    n_digits = std::min(n_digits, digits_within(hi->int_digits));
  }
  if (lo) {
    if (lo->negative) {
      n_digits = std::min(n_digits, digits_within(lo->int_digits));
    } else if (lo->is_zero()) {
      signs = IntegerSigns::kNonNegative;
    } else if (lo->int_digits == "1") {
      signs = IntegerSigns::kPositive;
    } else {
      return std::nullopt;
    }
  }
  if (n_digits == 0) return std::nullopt;
  std::string expr = integer_multiple_gbnf(k_digits, prefix, rules, n_digits, signs);
  if (expr.empty()) return std::nullopt;
  return expr;
}

}  // namespace tandem::grammar
