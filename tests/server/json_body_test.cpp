// Request bodies' JSON (src/server/json_body.h) without sockets: the same values nlohmann's
// own parser gives, the limits as 400s that name them, abandonment, and time linear in the
// body's size whatever its shape (nlohmann's ordered_json parser is quadratic in an object's
// keys and in the depth of objects followed by more keys).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "server/json_body.h"
#include "server/openai_protocol.h"

namespace tandem::server {
namespace {

// The ApiError's message; fails the test when parsing succeeds or throws anything else.
std::string rejection(std::string_view text, const JsonBodyLimits& limits = {}) {
  try {
    parse_json_body(text, limits);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << text.substr(0, 100);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << text.substr(0, 100) << ": not an ApiError: " << e.what();
    return {};
  }
  ADD_FAILURE() << text.substr(0, 100) << ": accepted";
  return {};
}

TEST(JsonBody, GivesWhatNlohmannGives) {
  for (const char* text : {R"({"prompt":"hi","n":2,"stop":["a","b"],"x":{"z":1,"a":[1,2.5,-3,true,false,null,{}]}})",
                           R"([1,"two",{"three":3},[[]],18446744073709551615,-9223372036854775808,1e-300])",
                           R"("just a string")", "42", R"({"dup":1,"other":2,"dup":3,"dup":{"last":true}})",
                           R"({"b":1,"a":2,"c":{"y":1,"x":2,"y":3}})", " \n{ \"spaced\" : [ 1 , 2 ] }\t"}) {
    const RequestJson expected = RequestJson::parse(text);
    const RequestJson got = parse_json_body(text);
    EXPECT_EQ(got, expected) << text;
    EXPECT_EQ(got.dump(), expected.dump()) << text << ": key order";
  }
}

TEST(JsonBody, SyntaxErrorsAndOverflowsAre400s) {
  EXPECT_NE(rejection(R"({"prompt": [1, 2)").find("not valid JSON"), std::string::npos);
  EXPECT_NE(rejection(R"({"a":1} trailing)").find("not valid JSON"), std::string::npos);
  EXPECT_NE(rejection(R"({"x":1e400})").find("1e400"), std::string::npos);
  EXPECT_NE(rejection("").find("not valid JSON"), std::string::npos);
}

TEST(JsonBody, LimitsAre400sNamingTheLimit) {
  const JsonBodyLimits limits{.max_depth = 8, .max_object_keys = 4, .max_key_bytes = 5, .max_values = 20};
  EXPECT_EQ(parse_json_body("[[[[[[[[1]]]]]]]]", limits).dump(), "[[[[[[[[1]]]]]]]]");
  EXPECT_NE(rejection("[[[[[[[[[1]]]]]]]]]", limits).find("deeper than 8 levels"), std::string::npos);
  EXPECT_NE(rejection(R"({"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{}}}}}}}}})", limits).find("deeper than 8"),
            std::string::npos);
  EXPECT_NE(rejection(R"({"a":1,"b":2,"c":3,"d":4,"e":5})", limits).find("more than 4 keys"), std::string::npos);
  EXPECT_NE(rejection(R"({"abcdef":1})", limits).find("longer than 5 bytes"), std::string::npos);
  EXPECT_NE(rejection("[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]", limits).find("more than 20 values"),
            std::string::npos);
  // The defaults: 100k levels of nesting, 128k keys.
  EXPECT_NE(rejection(std::string(100000, '[') + std::string(100000, ']')).find("deeper than 256 levels"),
            std::string::npos);
  std::string keys = "{";
  for (int i = 0; i < 128 << 10; ++i) keys += (i == 0 ? "\"k" : ",\"k") + std::to_string(i) + "\":1";
  EXPECT_NE(rejection(keys + "}").find("more than 10000 keys"), std::string::npos);
}

// vLLM's guided_json may be the schema's JSON text: it is read as a body is.
TEST(JsonBody, GuidedJsonTextIsReadUnderTheSameLimits) {
  std::string schema = R"({"type":"object","properties":{)";
  for (int i = 0; i < 20000; ++i) schema += (i == 0 ? "\"p" : ",\"p") + std::to_string(i) + "\":{}";
  schema += "}}";
  const std::string body = RequestJson{{"prompt", "hi"}, {"guided_json", schema}}.dump();
  try {
    parse_request(Endpoint::Completions, body, 16);
    ADD_FAILURE() << "a guided_json text of 20000 properties was accepted";
  } catch (const ApiError& e) {
    EXPECT_NE(std::string_view(e.what()).find("more than 10000 keys"), std::string_view::npos) << e.what();
  }
}

TEST(JsonBody, AbandonedParseStops) {
  std::string many = "[";
  for (int i = 0; i < 100000; ++i) many += (i == 0 ? "1" : ",1");
  many += "]";
  int asked = 0;
  EXPECT_THROW(parse_json_body(many, {}, [&] { return ++asked >= 2; }), BodyAbandoned);
  EXPECT_EQ(asked, 2);
  EXPECT_EQ(parse_json_body(many, {}, [] { return false; }).size(), 100000u);
}

// The least time of five parses of `text`, in seconds (the least is the least disturbed by
// whatever else the machine runs).
double parse_seconds(const std::string& text) {
  double best = 1e9;
  for (int run = 0; run < 5; ++run) {
    const auto start = std::chrono::steady_clock::now();
    const RequestJson value = parse_json_body(text);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    EXPECT_FALSE(value.is_null());
  }
  return best;
}

// The same number of keys, in objects of 500 keys or of 5000: nlohmann's ordered_json parser
// scans an object's keys for each new one (10x slower for the large objects); a linear
// parser takes about as long for both.
TEST(JsonBody, TimeIsLinearInKeysPerObject) {
  const auto objects = [](int per_object, int count) {
    std::string text = "[";
    for (int o = 0; o < count; ++o) {
      text += o == 0 ? "{" : ",{";
      for (int k = 0; k < per_object; ++k) text += (k == 0 ? "\"key" : ",\"key") + std::to_string(k) + "\":1";
      text += "}";
    }
    return text + "]";
  };
  const double small = parse_seconds(objects(500, 100));
  const double large = parse_seconds(objects(5000, 10));
  EXPECT_LT(large / small, 3.0) << "100 objects of 500 keys: " << small << " s, 10 of 5000 keys: " << large << " s";
}

// The same bytes as chains of objects nested 10 or 120 deep, each level followed by another
// key: nlohmann's ordered_json copies a whole subtree each time the object holding it grows
// (quadratic in the depth); a linear parser takes about as long for both.
TEST(JsonBody, TimeIsLinearInNestingDepth) {
  const auto chains = [](int depth, int count) {
    std::string chain;
    for (int d = 0; d < depth; ++d) chain += R"({"a":)";
    chain += "1";
    for (int d = 0; d < depth; ++d) chain += R"(,"b":[1,2,3,4,5,6,7,8]})";
    std::string text = "[";
    for (int c = 0; c < count; ++c) text += (c == 0 ? "" : ",") + chain;
    return text + "]";
  };
  const double shallow = parse_seconds(chains(10, 3000));
  const double deep = parse_seconds(chains(120, 250));
  EXPECT_LT(deep / shallow, 3.0) << "3000 chains 10 deep: " << shallow << " s, 250 chains 120 deep: " << deep << " s";
}

}  // namespace
}  // namespace tandem::server
