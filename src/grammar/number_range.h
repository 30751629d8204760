// Numeric bounds as grammar: GBNF expressions that match exactly the JSON numbers written in
// plain decimal (no exponent) between two bounds, for JSON Schema's minimum, maximum,
// exclusiveMinimum, exclusiveMaximum and multipleOf. Bounds are exact decimal digit strings
// (never doubles), so a range such as -9007199254740991..9007199254740991 or 0..255 is the
// exact set: 255 in, 256 out, no leading zeros, no "-0". The expressions are linear in the
// bounds' digits (each digit position adds at most three alternatives).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tandem::grammar {

// Digits a bound may have (integer and fraction digits together): larger bounds are an
// InputError that names this limit (a 1e300 bound would be 300 digit positions of grammar).
constexpr size_t kMaxBoundDigits = 64;
// Integer digits written when a side is unbounded, as the plain `integer` rule allows
// (a model cannot loop on digits), or the bound's own length when that is longer.
constexpr size_t kDefaultIntegerDigits = 16;
// Fraction digits of a number, as the plain `number` rule allows.
constexpr size_t kDefaultFractionDigits = 16;
// The largest integer multipleOf written as a remainder automaton (one rule per remainder and
// digit position: 100 makes ~1500 rules, ~400 KB of grammar). Powers of ten are any size up to
// 10^15 (the number ends in that many zeros).
constexpr int64_t kMaxIntegerMultipleOf = 100;

// An exact decimal: sign, integer digits without leading zeros ("0" for zero), fraction digits
// without trailing zeros.
struct Decimal {
  bool negative = false;
  std::string int_digits = "0";
  std::string frac_digits;

  bool is_zero() const { return int_digits == "0" && frac_digits.empty(); }
  bool is_integer() const { return frac_digits.empty(); }
  std::string text() const;  // "-12.5"
};

// The exact decimal value of a JSON number (integers exactly, doubles as their shortest
// round-trip text); InputError naming `what` when it has more than kMaxBoundDigits digits.
Decimal decimal_of(const nlohmann::ordered_json& number, const std::string& what);

// -1, 0, 1 as a <, ==, > b.
int compare(const Decimal& a, const Decimal& b);

struct Bound {
  Decimal value;
  bool exclusive = false;
};

// Integers in [min, max] (either side optional; exclusive bounds and fractional bounds are
// rounded inwards). nullopt when no integer satisfies them.
std::optional<std::string> integer_range_gbnf(const std::optional<Bound>& min, const std::optional<Bound>& max);

enum class IntegerSigns { kAll, kNonNegative, kPositive };

// Integers that are multiples of `k` (given as its digits: 2..kMaxIntegerMultipleOf, or a power
// of ten), of `signs`, up to `n_digits` digits: a remainder automaton whose rules are named
// `prefix`-N-R; their definitions are appended to `rules` ("name ::= body\n" lines). Returns
// the expression ("" when no such integer exists); InputError past kMaxIntegerMultipleOf.
std::string integer_multiple_gbnf(const std::string& k, const std::string& prefix, std::string& rules,
                                  size_t n_digits = kDefaultIntegerDigits, IntegerSigns signs = IntegerSigns::kAll);

// The same under bounds, where the automaton can follow them: a lower bound of 0 or 1 (the
// non-negative or positive multiples) or one at or below -(10^D - 1), and an upper bound at or
// above 10^D - 1 (all multiples of up to D digits: zod's .int() safe range gives D = 15).
// Narrower than the bounds when they are not of that form (multiples up to 99 for a maximum of
// 150); nullopt when the bounds are of another shape (a minimum of 7) or leave no digits.
std::optional<std::string> integer_multiple_in_range_gbnf(const std::string& k, const std::string& prefix,
                                                          std::string& rules, const std::optional<Bound>& min,
                                                          const std::optional<Bound>& max);

// Numbers in plain decimal between the bounds, with at most `fraction_digits` fraction
// digits. nullopt when no such number satisfies them.
std::optional<std::string> number_range_gbnf(const std::optional<Bound>& min, const std::optional<Bound>& max,
                                             size_t fraction_digits);

}  // namespace tandem::grammar
