// Regex to grammar (regex_grammar.h): whole-match (guided_regex) and JSON Schema pattern
// semantics (inside a JSON string, unanchored unless ^ / $ say otherwise), each construct
// checked on strings it must and must not match; constructs that are not regular and the
// size limits refused by name. And the string formats (string_formats.h) through json_schema.h.
#include <gtest/gtest.h>

#include <memory>
#include <regex>
#include <string>

#include "base/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex_grammar.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

bool matches(const Grammar& g, std::string_view text) {
  GrammarMatcher m(std::make_shared<const Grammar>(g));
  return m.accept_bytes(text) && m.can_end();
}

Grammar whole(const std::string& pattern) { return parse_gbnf("root ::= " + regex_to_gbnf(pattern, {}, "regex")); }

Grammar pattern_schema(const std::string& pattern) {
  return json_schema_grammar(Json{{"type", "string"}, {"pattern", pattern}});
}

std::string error_of(const std::string& pattern) {
  try {
    whole(pattern);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* pattern;
  std::vector<const char*> in, out;
};

TEST(GrammarRegex, WholeMatchConstructs) {
  const Case cases[] = {
      {"abc", {"abc"}, {"ab", "abcd", "xabc"}},
      {"^abc$", {"abc"}, {"abcd"}},
      {"[a-c]+x?", {"a", "cab", "bx"}, {"", "d", "axx"}},
      {"\\d{3}-\\d{4}", {"555-1234"}, {"55-1234", "5555-1234", "abc-defg"}},
      {"(ab|cd){2,3}", {"abab", "abcdab"}, {"ab", "abababab", "abc"}},
      {"[^0-9]+", {"abc", "é!"}, {"a1", ""}},
      {"\\w+\\s\\W", {"a_1 !"}, {"a_1 b", "a_1!!"}},
      {"a.c", {"abc", "a-c", "a€c"}, {"a\nc", "ac"}},
      {"\\.\\*\\\\", {".*\\"}, {"a*\\"}},
      {"x{2,}", {"xx", "xxxxx"}, {"x"}},
      {"x{0,2}y", {"y", "xy", "xxy"}, {"xxxy"}},
      {"(?:a|b)(?<n>c)+?", {"ac", "bccc"}, {"c", "ab"}},
      {"[\\d.-]+", {"-1.5", "..."}, {"a"}},
      {"a|^b|c$", {"a", "b", "c"}, {"ab", ""}},
      {"\\u00e9\\x41\\t", {"éA\t"}, {"eA\t"}},
      {"[^\\n]", {"x"}, {"\n"}},
      {"a{,3}", {"a{,3}"}, {"aaa"}},  // not a repeat in JavaScript: literal braces
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    const Grammar g = whole(c.pattern);
    for (const char* s : c.in) EXPECT_TRUE(matches(g, s)) << "in: " << s;
    for (const char* s : c.out) EXPECT_FALSE(matches(g, s)) << "out: " << s;
  }
}

TEST(GrammarRegex, SchemaPatternsAreUnanchoredAndJsonEscaped) {
  const Grammar anchored = pattern_schema("^[A-Z]{3}$");
  EXPECT_TRUE(matches(anchored, "\"ABC\""));
  EXPECT_FALSE(matches(anchored, "\"ABCD\""));
  EXPECT_FALSE(matches(anchored, "\"abc\""));
  const Grammar anywhere = pattern_schema("abc");
  EXPECT_TRUE(matches(anywhere, "\"abc\""));
  EXPECT_TRUE(matches(anywhere, "\"xx abc yy\""));
  EXPECT_FALSE(matches(anywhere, "\"ab\""));
  const Grammar prefix = pattern_schema("^a");
  EXPECT_TRUE(matches(prefix, "\"abbb\""));
  EXPECT_FALSE(matches(prefix, "\"ba\""));
  const Grammar suffix = pattern_schema("z$");
  EXPECT_TRUE(matches(suffix, "\"xyz\""));
  EXPECT_FALSE(matches(suffix, "\"zy\""));
  // Characters JSON escapes are matched in their escaped form.
  const Grammar quote = pattern_schema("^a\"\\\\\\n$");  // a, ", \, newline
  EXPECT_TRUE(matches(quote, R"("a\"\\\n")"));
  EXPECT_FALSE(matches(quote, "\"a\"\\\n\""));
  const Grammar not_digit = pattern_schema("^[^0-9]$");
  EXPECT_TRUE(matches(not_digit, R"("\"")"));
  EXPECT_TRUE(matches(not_digit, R"("\t")"));
  EXPECT_TRUE(matches(not_digit, R"("\u0001")"));
  EXPECT_FALSE(matches(not_digit, R"("5")"));
  EXPECT_FALSE(matches(not_digit, "\"\"\""));
}

TEST(GrammarRegex, NonRegularConstructsAreRefusedByName) {
  EXPECT_NE(error_of("(a)\\1").find("backreferences"), std::string::npos);
  EXPECT_NE(error_of("(?<x>a)\\k<x>").find("backreferences"), std::string::npos);
  EXPECT_NE(error_of("(?=a)a").find("lookahead"), std::string::npos);
  EXPECT_NE(error_of("(?!a)b").find("lookahead"), std::string::npos);
  EXPECT_NE(error_of("(?<=a)b").find("lookbehind"), std::string::npos);
  EXPECT_NE(error_of("(?<!a)b").find("lookbehind"), std::string::npos);
  EXPECT_NE(error_of("\\bfoo").find("word boundary"), std::string::npos);
  EXPECT_NE(error_of("\\p{L}").find("Unicode property"), std::string::npos);
  EXPECT_NE(error_of("a^b").find("anchor"), std::string::npos);
  EXPECT_NE(error_of("(^a)").find("anchor"), std::string::npos);
  EXPECT_NE(error_of("(?i)a").find("inline flags"), std::string::npos);
  EXPECT_NE(error_of("(a*)*").find("empty string"), std::string::npos);
  EXPECT_NE(error_of("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(error_of("(a").find("missing ')'"), std::string::npos);
  EXPECT_NE(error_of("a)").find("unbalanced"), std::string::npos);
  EXPECT_NE(error_of("[a").find("unterminated"), std::string::npos);
  EXPECT_NE(error_of("[z-a]").find("backwards"), std::string::npos);
}

TEST(GrammarRegex, SizeLimitsAreCheckedFirstAndNamed) {
  EXPECT_NE(error_of("a{0,100000}").find("kMaxRepetitionCount"), std::string::npos);
  EXPECT_NE(error_of("a{99999999999999999999}").find("kMaxRepetitionCount"), std::string::npos);
  EXPECT_NE(error_of("((ab{0,100}){0,100}){0,100}").find("kMaxExpandedRepetition"), std::string::npos);
  EXPECT_NE(error_of("((a{10000}){10000}){10000}").find("kMaxGrammarElements"), std::string::npos);
  EXPECT_NE(error_of(std::string(kMaxRegexBytes + 1, 'a')).find("kMaxRegexBytes"), std::string::npos);
  EXPECT_NE(error_of(std::string(200, '(') + std::string(200, ')')).find("nested deeper"), std::string::npos);
  // Through a schema, the error names the keyword and where it is.
  try {
    json_schema_to_gbnf(
        Json::parse(R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "x{0,100000}"}}})"));
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'pattern' at #/properties/s"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("kMaxRepetitionCount"), std::string::npos) << e.what();
  }
}

TEST(GrammarStringFormats, EachFormatAcceptsValidAndRefusesInvalidStrings) {
  const Case cases[] = {
      {"date-time", {"2024-05-01T12:30:00Z", "1999-12-31T23:59:59.123Z"}, {"2024-05-01 12:30:00Z"}},
      {"date", {"2024-02-28", "2023-12-31", "2023-04-30"}, {"2024-2-28", "2024-00-10", "2023-04-31", "2024-02-30"}},
      {"time", {"23:59:59Z", "00:00:00.5-05:00"}, {"24:00:00Z", "12:00"}},
      {"duration", {"P1Y2M", "PT5M", "P3W", "P1DT2H3M4S", "P12M"}, {"P", "PT", "P1H", "1Y", "P1Y2W"}},
      {"email", {"a.b+c@example.com", "x@mail.example.co"}, {"@example.com", "a b@example.com", "a@@b.com"}},
      {"hostname", {"example.com", "a-b.c1", "localhost"}, {"-a.com", "a_b.com", "a..b", ""}},
      {"ipv4", {"0.0.0.0", "255.255.255.255", "192.168.1.20"}, {"256.1.1.1", "1.2.3", "01.2.3.4", "1.2.3.4.5"}},
      {"ipv6",
       {"::1", "::", "2001:db8::1", "1:2:3:4:5:6:7:8", "fe80::1:2", "1::"},
       {"1:2:3:4:5:6:7:8:9", ":::", "1::2::3", "12345::1", "g::1"}},
      {"uuid", {"123e4567-e89b-12d3-a456-426614174000"}, {"123e4567e89b12d3a456426614174000"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    const Grammar g = json_schema_grammar(Json{{"type", "string"}, {"format", c.pattern}});
    for (const char* s : c.in) EXPECT_TRUE(matches(g, "\"" + std::string(s) + "\"")) << "in: " << s;
    for (const char* s : c.out) EXPECT_FALSE(matches(g, "\"" + std::string(s) + "\"")) << "out: " << s;
  }
}

// zod 4 writes a pattern beside each format; the schema is followed when the pattern is known
// to hold for every string the format's grammar writes. Checked here on samples the grammar
// accepts, with an ECMAScript regex engine (std::regex: lookahead included). The patterns are
// zod 3.25.76's zod/v4 z.toJSONSchema output.
TEST(GrammarStringFormats, ZodsPatternsBesideFormatsHoldForTheFormatsGrammar) {
  const std::string date =
      R"((?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8]))))";
  struct Known {
    const char* format;
    std::string pattern;
    std::vector<const char*> samples;
  };
  const Known known[] = {
      {"email",
       R"(^(?!\.)(?!.*\.\.)([A-Za-z0-9_'+\-\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$)",
       {"a.b+c@example.com", "x_y-z@mail.example.co", "Q@a-b.io", "a-@b.cd"}},
      {"uuid",
       R"(^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000)$)",
       {"123e4567-e89b-12d3-a456-426614174000", "ABCDEF01-2345-8789-BCDE-F0123456789A"}},
      {"date", "^" + date + "$", {"2024-02-28", "0000-01-01", "9999-12-31", "2023-04-30"}},
      {"date-time",
       "^" + date + R"(T(?:(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:Z))$)",
       {"2024-05-01T12:30:00Z", "1999-12-31T23:59:59.123456Z"}},
      {"duration",
       R"(^P(?:(\d+W)|(?!.*W)(?=\d|T\d)(\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+([.,]\d+)?S)?)?)$)",
       {"P1Y2M3DT4H5M6S", "PT5M", "P3W", "P1D", "P1MT1S"}},
      {"ipv4",
       R"(^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$)",
       {"0.0.0.0", "255.255.255.255", "10.20.30.40"}},
  };
  for (const Known& k : known) {
    SCOPED_TRACE(k.format);
    const Json schema = {{"type", "string"}, {"format", k.format}, {"pattern", k.pattern}};
    const Grammar g = json_schema_grammar(schema);  // accepted: the pattern is known
    const std::regex re(k.pattern, std::regex::ECMAScript);
    for (const char* s : k.samples) {
      EXPECT_TRUE(matches(g, "\"" + std::string(s) + "\"")) << s;
      EXPECT_TRUE(std::regex_match(s, re)) << s;
    }
    // Another pattern beside the format: refused, naming both.
    try {
      json_schema_grammar(Json{{"type", "string"}, {"format", k.format}, {"pattern", "^a"}});
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("with a 'pattern'"), std::string::npos) << e.what();
    }
  }
}

// Length bounds beside a pattern hold when every match has such a length; otherwise refused.
TEST(GrammarRegex, PatternWithLengthBoundsOnlyWhenTheyAreImplied) {
  const Grammar g = json_schema_grammar(
      Json::parse(R"({"type": "string", "pattern": "^[A-Z]{3}$", "minLength": 3, "maxLength": 5})"));
  EXPECT_TRUE(matches(g, "\"ABC\""));
  EXPECT_FALSE(matches(g, "\"AB\""));
  for (const char* schema : {R"({"type": "string", "pattern": "^[a-z]+$", "minLength": 2})",
                             R"({"type": "string", "pattern": "^[a-z]{2}", "maxLength": 8})"}) {
    try {
      json_schema_grammar(Json::parse(schema));
      ADD_FAILURE() << "accepted " << schema;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("minLength/maxLength"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tandem::grammar
