// Numeric bounds of JSON Schema (number_range.h, through json_schema.h): each range accepts
// exactly its members — checked against every integer of a window for many random integer
// ranges, and against a list of number texts for decimal bounds — with no leading zeros and
// no "-0"; bounds of any size up to the digit limit; multipleOf; limits and empty ranges
// refused by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/number_range.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

bool matches(const Grammar& g, std::string_view text) {
  GrammarMatcher m(std::make_shared<const Grammar>(g));
  return m.accept_bytes(text) && m.can_end();
}

Grammar schema(const std::string& text) { return json_schema_grammar(Json::parse(text)); }

std::string error_of(const std::string& text) {
  try {
    json_schema_to_gbnf(Json::parse(text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarNumberRange, ByteRange) {
  const Grammar g = schema(R"({"type": "integer", "minimum": 0, "maximum": 255})");
  for (const char* in : {"0", "1", "9", "10", "99", "100", "199", "200", "249", "250", "255"})
    EXPECT_TRUE(matches(g, in)) << in;
  for (const char* out : {"256", "260", "300", "999", "1000", "2550", "-1", "-0", "00", "01", "007", "1.0", "1e2"})
    EXPECT_FALSE(matches(g, out)) << out;
}

TEST(GrammarNumberRange, SafeIntegerRangeAsZodWritesIt) {
  const Grammar g = schema(R"({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991})");
  for (const char* in : {"0", "-1", "42", "9007199254740991", "-9007199254740991", "9007199254740990",
                         "1234567890123456", "-999999999999999"})
    EXPECT_TRUE(matches(g, in)) << in;
  for (const char* out :
       {"9007199254740992", "-9007199254740992", "9999999999999999", "10000000000000000", "-0", "0123"})
    EXPECT_FALSE(matches(g, out)) << out;
}

TEST(GrammarNumberRange, MixedLengthsAndExclusiveBounds) {
  const Grammar g = schema(R"({"type": "integer", "minimum": 10, "maximum": 99999})");
  for (const char* in : {"10", "11", "99", "100", "5000", "99998", "99999"}) EXPECT_TRUE(matches(g, in)) << in;
  for (const char* out : {"9", "0", "100000", "010", "-10"}) EXPECT_FALSE(matches(g, out)) << out;
  const Grammar positive = schema(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10})");
  EXPECT_FALSE(matches(positive, "0"));
  EXPECT_TRUE(matches(positive, "1"));
  EXPECT_TRUE(matches(positive, "9"));
  EXPECT_FALSE(matches(positive, "10"));
  // Draft 4's boolean form, and fractional bounds rounded inwards.
  const Grammar draft4 = schema(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})");
  EXPECT_FALSE(matches(draft4, "5"));
  EXPECT_TRUE(matches(draft4, "6"));
  const Grammar half = schema(R"({"type": "integer", "minimum": 0.5, "maximum": 2.5})");
  EXPECT_FALSE(matches(half, "0"));
  EXPECT_TRUE(matches(half, "1"));
  EXPECT_TRUE(matches(half, "2"));
  EXPECT_FALSE(matches(half, "3"));
  // One side only: the other side keeps the plain integer's 16 digits.
  const Grammar non_negative = schema(R"({"type": "integer", "minimum": 0})");
  EXPECT_TRUE(matches(non_negative, "0"));
  EXPECT_TRUE(matches(non_negative, "9999999999999999"));
  EXPECT_FALSE(matches(non_negative, "-1"));
  const Grammar below = schema(R"({"type": "integer", "maximum": -3})");
  EXPECT_TRUE(matches(below, "-3"));
  EXPECT_TRUE(matches(below, "-100"));
  EXPECT_FALSE(matches(below, "-2"));
  EXPECT_FALSE(matches(below, "0"));
}

TEST(GrammarNumberRange, RandomIntegerRangesMatchExactlyTheirMembers) {
  std::mt19937 rng(35);
  std::uniform_int_distribution<int> bound(-1200, 1200);
  for (int round = 0; round < 40; ++round) {
    int lo = bound(rng), hi = bound(rng);
    if (lo > hi) std::swap(lo, hi);
    const bool has_lo = round % 5 != 1, has_hi = round % 5 != 2;
    Json s = {{"type", "integer"}};
    if (has_lo) s["minimum"] = lo;
    if (has_hi) s["maximum"] = hi;
    SCOPED_TRACE(s.dump());
    const Grammar g = json_schema_grammar(s);
    for (int x = -1500; x <= 1500; x += (x > -30 && x < 30) ? 1 : 7) {
      const bool member = (!has_lo || x >= lo) && (!has_hi || x <= hi);
      ASSERT_EQ(matches(g, std::to_string(x)), member) << x;
    }
    EXPECT_FALSE(matches(g, "-0"));
  }
}

TEST(GrammarNumberRange, LargeBoundsAreExact) {
  // Past 2^64 a JSON number is read as a double: 1e20 and 1.5e20 are exact in one.
  const Grammar g = schema(R"({"type": "integer", "minimum": 1e20, "maximum": 1.5e20})");
  EXPECT_TRUE(matches(g, "100000000000000000000"));
  EXPECT_TRUE(matches(g, "100000000000000000003"));
  EXPECT_TRUE(matches(g, "150000000000000000000"));
  EXPECT_FALSE(matches(g, "150000000000000000001"));
  EXPECT_FALSE(matches(g, "99999999999999999999"));
  const Grammar u64 = schema(R"({"type": "integer", "minimum": 0, "maximum": 18446744073709551615})");
  EXPECT_TRUE(matches(u64, "18446744073709551615"));
  EXPECT_FALSE(matches(u64, "18446744073709551616"));
}

// The value of a JSON number text (those below are exact enough in a double to compare).
bool number_member(const std::string& text, double lo, bool lo_ex, double hi, bool hi_ex) {
  const double v = std::strtod(text.c_str(), nullptr);
  return (lo_ex ? v > lo : v >= lo) && (hi_ex ? v < hi : v <= hi);
}

TEST(GrammarNumberRange, DecimalBoundsMatchExactlyTheirMembers) {
  const double bounds[] = {-1.5, -1, -0.25, 0, 0.5, 1, 2.75, 10};
  // Plain decimal texts; the grammar writes no exponent and no "-0" (below).
  const char* const texts[] = {"-2",   "-1.5",  "-1.50", "-1.49", "-1.51", "-1",      "-0.5", "-0.25", "-0.2",
                               "0",    "0.0",   "0.5",   "0.49",  "0.51",  "0.50001", "1",    "1.0",   "2.75",
                               "2.74", "2.751", "10",    "10.0",  "10.01", "9.999",   "11",   "3"};
  for (double lo : bounds) {
    for (double hi : bounds) {
      if (lo > hi) continue;
      for (int ex = 0; ex < 4; ++ex) {
        const bool lo_ex = (ex & 1) != 0, hi_ex = (ex & 2) != 0;
        if (lo == hi && (lo_ex || hi_ex)) continue;
        Json s = {{"type", "number"},
                  {lo_ex ? "exclusiveMinimum" : "minimum", lo},
                  {hi_ex ? "exclusiveMaximum" : "maximum", hi}};
        SCOPED_TRACE(s.dump());
        const Grammar g = json_schema_grammar(s);
        for (const char* t : texts) EXPECT_EQ(matches(g, t), number_member(t, lo, lo_ex, hi, hi_ex)) << t;
        for (const char* never : {"-0", "-0.0", "1e0", "01", "1.", ".5"}) EXPECT_FALSE(matches(g, never)) << never;
      }
    }
  }
}

TEST(GrammarNumberRange, MultipleOf) {
  const Grammar cents = schema(R"({"type": "number", "minimum": 0, "multipleOf": 0.01})");
  for (const char* in : {"0", "1.25", "1.2", "100"}) EXPECT_TRUE(matches(cents, in)) << in;
  for (const char* out : {"1.255", "-1", "1e2"}) EXPECT_FALSE(matches(cents, out)) << out;
  const Grammar whole = schema(R"({"type": "number", "multipleOf": 1})");
  EXPECT_TRUE(matches(whole, "-12"));
  EXPECT_FALSE(matches(whole, "1.5"));
  const Grammar sevens = schema(R"({"type": "integer", "multipleOf": 7})");
  for (int x = -200; x <= 200; ++x) ASSERT_EQ(matches(sevens, std::to_string(x)), x % 7 == 0) << x;
  EXPECT_FALSE(matches(sevens, "-0"));
  EXPECT_FALSE(matches(sevens, "07"));
  EXPECT_TRUE(matches(sevens, "7000000000000007"));  // 16 digits
  EXPECT_TRUE(matches(schema(R"({"type": "integer", "multipleOf": 0.1})"), "3"));
  const Grammar thousands = schema(R"({"type": "integer", "multipleOf": 1000})");
  for (const char* in : {"0", "1000", "-25000", "1000000000000000"}) EXPECT_TRUE(matches(thousands, in)) << in;
  for (const char* out : {"100", "1001", "-0", "01000", "10000000000000000"})
    EXPECT_FALSE(matches(thousands, out)) << out;
  // Under bounds of the shapes clients write: zod 4's .int().multipleOf(5) (the safe integer
  // range: multiples of up to 15 digits), .nonnegative() and .positive().
  const Grammar zod =
      schema(R"({"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991, "multipleOf": 5})");
  for (const char* in : {"0", "5", "-35", "999999999999995"}) EXPECT_TRUE(matches(zod, in)) << in;
  for (const char* out : {"3", "-1", "1000000000000000"}) EXPECT_FALSE(matches(zod, out)) << out;
  const Grammar non_negative = schema(R"({"type": "integer", "minimum": 0, "multipleOf": 3})");
  EXPECT_TRUE(matches(non_negative, "0"));
  EXPECT_TRUE(matches(non_negative, "9"));
  EXPECT_FALSE(matches(non_negative, "-9"));
  const Grammar positive = schema(R"({"type": "integer", "exclusiveMinimum": 0, "maximum": 150, "multipleOf": 10})");
  EXPECT_FALSE(matches(positive, "0"));
  EXPECT_TRUE(matches(positive, "10"));
  EXPECT_TRUE(matches(positive, "90"));
  EXPECT_FALSE(matches(positive, "200"));
  const Grammar ninety_nine = schema(R"({"type": "integer", "multipleOf": 99})");
  for (int x = -500; x <= 500; ++x) ASSERT_EQ(matches(ninety_nine, std::to_string(x)), x % 99 == 0) << x;
}

TEST(GrammarNumberRange, LimitsAndEmptyRangesAreRefusedByName) {
  EXPECT_NE(error_of(R"({"type": "integer", "minimum": 1e100})").find("limit on a bound's digits"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "number", "maximum": 1e-100})").find("limit on a bound's digits"), std::string::npos);
  EXPECT_EQ(error_of(R"({"type": "integer", "minimum": 5, "maximum": 3})"),
            "json schema: no integer satisfies the bounds at #");
  EXPECT_EQ(error_of(R"({"type": "integer", "minimum": 2.1, "maximum": 2.9})"),
            "json schema: no integer satisfies the bounds at #");
  EXPECT_EQ(error_of(R"({"type": "number", "exclusiveMinimum": 1, "exclusiveMaximum": 1})"),
            "json schema: no number satisfies the bounds at #");
  EXPECT_NE(error_of(R"({"type": "integer", "minimum": 7, "multipleOf": 5})").find("with these minimum/maximum"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "maximum": -7, "multipleOf": 5})").find("with these minimum/maximum"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "multipleOf": 101})").find("kMaxIntegerMultipleOf"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "number", "multipleOf": 0.25})").find("'multipleOf' 0.25"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "integer", "minimum": "3"})").find("must be a number"), std::string::npos);
}

}  // namespace
}  // namespace tandem::grammar
