// JSON Schema to grammar: documents a validator accepts are matched, documents it rejects are
// not (each case below was checked with python3-jsonschema, Draft 2020-12, when written), and
// keywords outside the subset are errors that name them.
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace tandem::grammar {
namespace {

using Json = nlohmann::ordered_json;

bool matches(const Grammar& g, std::string_view text) {
  GrammarMatcher m(std::make_shared<const Grammar>(g));
  return m.accept_bytes(text) && m.can_end();
}

struct Case {
  const char* schema;
  std::vector<const char*> valid;
  std::vector<const char*> invalid;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> kCases = {
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a", "b"], "additionalProperties": false})",
       {R"({"a": 1, "b": "x"})", R"({"a":-20,"b":""})", "{\n  \"a\": 0,\n  \"b\": \"\\u00e9\\n\"\n}"},
       {R"({"a": 1})", R"({"a": 1.5, "b": "x"})", R"({"a": 01, "b": "x"})", R"({"a": 1, "b": "x", "c": 2})",
        R"({"a": 1, "b": x})", R"({"a": 1, "b": "x",})"}},
      {R"({"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "boolean"}, "z": {"type": "null"}}, "required": ["y"]})",
       {R"({"y": true})", R"({"x": 1.5e3, "y": false})", R"({"y": true, "z": null})",
        R"({"x": -0.25, "y": true, "z": null})"},
       {R"({})", R"({"x": 1})", R"({"x": 1,, "y": true})", R"({, "y": true})", R"({"y": 1})",
        R"({"x": 1., "y": true})"}},
      {R"({"type": "object", "properties": {"o": {"type": "string"}}})",
       {R"({})", R"({"o": "v"})"},
       {R"({"o": 1})", R"({"o": "v",})"}},
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
       {"[1, 2]", "[1,2,3]", "[ 0 , -5 , 7 ]"},
       {"[]", "[1]", "[1, 2, 3, 4]", "[1, \"a\"]", "[1, 2,]"}},
      {R"({"type": "array", "items": {"type": "string"}})",
       {"[]", "[\"a\"]", "[\"a\", \"b\", \"c\"]"},
       {"[,]", "[\"a\",]", "{}"}},
      {R"({"enum": ["red", "green", 3, null]})", {"\"red\"", "\"green\"", "3", "null"}, {"\"blue\"", "\"Red\"", "4"}},
      {R"({"const": {"k": [1, "two"]}})", {R"({"k":[1,"two"]})"}, {R"({"k":[1,"three"]})"}},
      {R"({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "boolean"}}]})",
       {"7", "[true, false]", "[]"},
       {"\"7\"", "[1]", "7.5"}},
      {R"({"type": ["string", "null"], "minLength": 2, "maxLength": 3})",
       {"\"ab\"", "\"abc\"", "null", "\"\\n\\u0041\"", "\"éé\""},
       {"\"a\"", "\"abcd\"", "1"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"], "additionalProperties": false}}, "$ref": "#/$defs/node"})",
       {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": {"v": 3, "next": null}}})"},
       {R"({"v": 1})", R"({"v": 1, "next": {"v": 2}})", R"({"v": 1, "next": 5})"}},
      {R"({"type": "object", "additionalProperties": {"type": "integer"}})",
       {"{}", R"({"a": 1, "b": 2})"},
       {R"({"a": "x"})", R"({"a": 1,})"}},
      {R"({"type": "string", "format": "date-time"})",
       {"\"2024-05-01T12:30:00Z\"", "\"1999-12-31T23:59:59.123Z\""},
       {"\"2024-13-01T12:30:00Z\"", "\"2024-05-01 12:30:00Z\"", "\"2024-05-01T24:00:00Z\""}},
      {R"({"type": "string", "format": "uuid"})",
       {"\"123e4567-e89b-12d3-a456-426614174000\""},
       {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""}},
      {R"({"type": "object", "required": ["k"]})", {R"({"k": [1]})", R"({"k": null})"}, {"{}", R"({"j": 1})"}},
      {R"({"type": "string", "enum": ["a", 1, "b"]})", {"\"a\"", "\"b\""}, {"1", "\"c\""}},
      {R"({})", {"1", "\"s\"", R"({"a": [1, {"b": null}]})", "[]", "true"}, {"", "[1,]", "nul", "{\"a\" 1}"}},
  };
  return kCases;
}

TEST(GrammarJsonSchema, AcceptsAndRejectsAsAValidatorWould) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.schema);
    const Grammar g = json_schema_grammar(Json::parse(c.schema));
    for (const char* doc : c.valid)
      EXPECT_TRUE(matches(g, doc)) << "valid: " << doc << "\n" << json_schema_to_gbnf(Json::parse(c.schema));
    for (const char* doc : c.invalid) EXPECT_FALSE(matches(g, doc)) << "invalid: " << doc;
  }
}

// 80 random schemas of the subset with documents and python3-jsonschema's verdicts, made
// offline by gen_json_schema_cases.py (valid documents in the grammar's narrowed form, invalid
// ones mutations of them).
TEST(GrammarJsonSchema, GeneratedCasesAgreeWithTheValidator) {
  static const char* const kCases =
#include "json_schema_cases.inc"
      ;
  const Json cases = Json::parse(kCases);
  ASSERT_EQ(cases.size(), 80u);
  size_t n_valid = 0, n_invalid = 0, n_narrowed = 0;
  for (const Json& c : cases) {
    const Grammar g = json_schema_grammar(c["schema"]);
    for (const Json& doc : c["docs"]) {
      const std::string text = doc["text"].get<std::string>();
      const bool valid = doc["valid"].get<bool>();
      (valid ? n_valid : n_invalid)++;
      // The one deliberate narrowing: strings under minLength/maxLength keep to the BMP (where
      // JSON Schema's code points and JavaScript's UTF-16 units agree), so a valid document
      // with a 4-byte UTF-8 character under a length-bounded schema may be refused.
      const bool astral = std::any_of(text.begin(), text.end(), [](char ch) { return (ch & 0xF8) == 0xF0; });
      const std::string schema_text = c["schema"].dump();
      if (valid && astral && schema_text.find("Length\"") != std::string::npos) {
        ++n_narrowed;
        continue;
      }
      EXPECT_EQ(matches(g, text), valid) << "schema " << schema_text << "\ndocument " << text;
    }
  }
  EXPECT_GT(n_valid, 200u);
  EXPECT_GT(n_invalid, 200u);
  EXPECT_LT(n_narrowed, n_valid / 10);
}

TEST(GrammarJsonSchema, LengthBoundedStringsKeepToTheBmpSoJavaScriptCountsAgree) {
  // zod's .max(4) counts UTF-16 units: "😀😀😀" is 3 code points (JSON Schema) but 6 units.
  const Grammar bounded = json_schema_grammar(Json::parse(R"({"type":"string","maxLength":4})"));
  EXPECT_TRUE(matches(bounded, "\"ab\u00dfc\""));
  EXPECT_TRUE(matches(bounded, "\"\xC3\x9F\xE2\x82\xAC\""));  // ß€: 2-byte and 3-byte UTF-8, in the BMP
  EXPECT_FALSE(matches(bounded, "\"\xF0\x9F\x98\x80\""));     // 😀: past U+FFFF
  const Grammar free = json_schema_grammar(Json::parse(R"({"type":"string"})"));
  EXPECT_TRUE(matches(free, "\"\xF0\x9F\x98\x80\""));  // without bounds any character
}

// The schema Pydantic 2 emits for a model with numeric and string constraints, $defs, anyOf
// with null and Literal, and documents judged by Pydantic itself (gen_pydantic_cases.py).
TEST(GrammarJsonSchema, PydanticSchemaAgreesWithPydantic) {
  std::ifstream file(std::filesystem::path(__FILE__).parent_path() / "pydantic_cases.json");
  ASSERT_TRUE(file) << "missing tests/grammar/pydantic_cases.json";
  std::stringstream text;
  text << file.rdbuf();
  const Json cases = Json::parse(text.str());
  const Grammar g = json_schema_grammar(cases["schema"]);
  size_t n_valid = 0;
  for (const Json& doc : cases["docs"]) {
    const bool valid = doc["valid"].get<bool>();
    n_valid += valid ? 1 : 0;
    EXPECT_EQ(matches(g, doc["text"].get<std::string>()), valid) << doc["text"];
  }
  EXPECT_GE(n_valid, 3u);
}

TEST(GrammarJsonSchema, AnyJsonObjectIsAnObject) {
  const Grammar g = any_json_object_grammar();
  EXPECT_TRUE(matches(g, R"({"a": [1, {"b": null}]})"));
  EXPECT_TRUE(matches(g, " {}"));
  for (const char* doc : {"1", "\"s\"", "[]", "null", "true"}) EXPECT_FALSE(matches(g, doc)) << doc;
}

TEST(GrammarJsonSchema, AnyJsonMatchesJsonValues) {
  const Grammar g = any_json_grammar();
  for (const char* doc :
       {"{}", " [1, -2.5e+10, \"x\\\"y\", true, false, null, {\"k\": {}}]", "\"\\ud83d\\ude00\"", "0"})
    EXPECT_TRUE(matches(g, doc)) << doc;
  for (const char* doc : {"{", "[1 2]", "01", "\"\x01\"", "tru", "{\"a\":1,}", "'a'", "NaN"})
    EXPECT_FALSE(matches(g, doc)) << doc;
}

// A \u escape of a lone surrogate is JSON by its grammar but no Unicode string: nlohmann and
// Python's json refuse it, so no grammar lets a model write one (a constrained reply that the
// client cannot parse). Pairs stay, and a length-bounded string takes no pair at all (two
// UTF-16 units for one code point).
TEST(GrammarJsonSchema, LoneSurrogateEscapesAreRefusedAndPairsKept) {
  const Grammar any = any_json_grammar();
  const Grammar pattern = json_schema_grammar(Json::parse(R"({"type":"string","pattern":"^a"})"));
  const Grammar bounded = json_schema_grammar(Json::parse(R"({"type":"string","maxLength":4})"));
  for (const Grammar* g : {&any, &pattern}) {
    EXPECT_TRUE(matches(*g, "\"a\\ud83d\\ude00\""));
    EXPECT_TRUE(matches(*g, "\"a\\uD7FF\\uE000\\uffff\""));
    for (const char* doc : {"\"a\\udf96\"", "\"a\\uD83D\"", "\"a\\ud83dx\"", "\"a\\ud83d\\u0041\""})
      EXPECT_FALSE(matches(*g, doc)) << doc;
  }
  EXPECT_TRUE(matches(bounded, "\"\\u00e9\\uD7FF\""));
  for (const char* doc : {"\"\\ud83d\\ude00\"", "\"\\uDC00\""}) EXPECT_FALSE(matches(bounded, doc)) << doc;
}

// A long output must not grow the matcher's pool without bound: repetition returns to the
// same states (tail references do not deepen the stack).
TEST(GrammarJsonSchema, LongOutputsReuseStates) {
  GrammarMatcher m(std::make_shared<const Grammar>(any_json_grammar()));
  ASSERT_TRUE(m.accept_bytes("[\"start\""));
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(m.accept_bytes(i % 2 == 0 ? ", 12.5" : ", \"some text here\""));
  const size_t states = m.pool().n_states(), nodes = m.pool().n_nodes();
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(m.accept_bytes(i % 2 == 0 ? ", 12.5" : ", \"some text here\""));
  EXPECT_EQ(m.pool().n_states(), states);
  EXPECT_EQ(m.pool().n_nodes(), nodes);
  EXPECT_LT(states, 200u);
  ASSERT_TRUE(m.accept_bytes("]"));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarJsonSchema, WhitespaceIsBounded) {
  JsonGrammarOptions options;
  options.max_whitespace = 3;
  const Grammar g = any_json_grammar(options);
  // One space, or one or two newlines and an indentation of at most 3 (llama.cpp's bound).
  EXPECT_TRUE(matches(g, "[1, 2]"));
  EXPECT_TRUE(matches(g, "[1,\n   2]"));
  EXPECT_TRUE(matches(g, "[1,\n\n\t2]"));
  EXPECT_TRUE(matches(g, "\n{}"));
  EXPECT_FALSE(matches(g, "[1,\n    2]"));
  EXPECT_FALSE(matches(g, "[1,  2]"));
  EXPECT_FALSE(matches(g, "[1,\n\n\n2]"));
  EXPECT_FALSE(matches(g, "[1, \n2]"));
  JsonGrammarOptions none;
  none.max_whitespace = 0;
  EXPECT_TRUE(matches(any_json_grammar(none), "[1,2]"));
  EXPECT_FALSE(matches(any_json_grammar(none), "[1, 2]"));
}

TEST(GrammarJsonSchema, OptionalPropertiesKeepSchemaOrder) {
  const Grammar g = json_schema_grammar(Json::parse(
      R"({"type": "object", "properties": {"c": {"type": "integer"}, "a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["b"]})"));
  EXPECT_TRUE(matches(g, R"({"c": 1, "a": 2, "b": 3})"));
  EXPECT_TRUE(matches(g, R"({"a": 2, "b": 3})"));
  EXPECT_TRUE(matches(g, R"({"c": 1, "b": 3})"));
  EXPECT_TRUE(matches(g, R"({"b": 3})"));
  EXPECT_FALSE(matches(g, R"({"a": 2, "c": 1, "b": 3})"));
}

std::string error_of(const char* schema) {
  try {
    json_schema_to_gbnf(Json::parse(schema));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAreNamed) {
  EXPECT_EQ(error_of(R"({"type": "object", "properties": {"n": {"type": "integer", "not": {"const": 3}}}})"),
            "json schema: unsupported keyword 'not' at #/properties/n");
  EXPECT_EQ(error_of(R"({"oneOf": [{"type": "integer"}]})"), "json schema: unsupported keyword 'oneOf' at #");
  EXPECT_EQ(error_of(R"({"type": "array", "uniqueItems": true})"),
            "json schema: unsupported keyword 'uniqueItems' at #");
  EXPECT_EQ(error_of(R"({"type": "text"})"), "json schema: unknown type 'text' at #");
  EXPECT_EQ(error_of(R"({"$ref": "#/$defs/missing"})"), "json schema: '$ref' '#/$defs/missing' at # points nowhere");
  EXPECT_EQ(error_of(R"({"type": "string", "format": "uri"})"), "json schema: unsupported string format 'uri' at #");
  EXPECT_EQ(error_of(R"({"anyOf": [{"type": "integer"}], "type": "integer"})"),
            "json schema: 'type' alongside 'anyOf' at # is not supported");
  EXPECT_EQ(error_of(R"({"$defs": {"a": {}}, "$ref": "#/$defs/a", "maxLength": 2})"),
            "json schema: 'maxLength' alongside '$ref' at # is not supported");
  EXPECT_EQ(error_of(R"({"type": "integer", "enum": ["a"]})"),
            "json schema: no 'enum' value at # has the schema's type");
  EXPECT_EQ(error_of(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})"),
            "json schema: 'required' at # names \"b\", which is not among the properties");
}

}  // namespace
}  // namespace tandem::grammar
