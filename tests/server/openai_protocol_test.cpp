// Request parsing (src/server/openai_protocol.h) on hostile JSON: every malformed or
// out-of-range input is a 400 ApiError whose message quotes what the client sent, never a
// library exception that would surface as a 500.
#include <gtest/gtest.h>

#include "server/openai_protocol.h"

namespace tandem::server {
namespace {

// The ApiError's message; fails the test when parsing succeeds or throws anything else.
std::string rejection(std::string_view body, Endpoint endpoint = Endpoint::Completions) {
  try {
    parse_request(endpoint, body, 16);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.type, "invalid_request_error") << body;
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << body << ": not an ApiError: " << e.what();
    return {};
  }
  ADD_FAILURE() << body << ": accepted";
  return {};
}

TEST(OpenAIProtocol, NumberOverflowIsA400QuotingTheNumber) {
  EXPECT_NE(rejection(R"({"prompt":"hi","x":1e400})").find("1e400"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","max_tokens":-1e999})").find("-1e999"), std::string::npos);
  EXPECT_NE(rejection("{\"prompt\": \"hi\"").find("not valid JSON"), std::string::npos);
}

TEST(OpenAIProtocol, TokenIdsOutOfRangeAreQuotedAsSent) {
  EXPECT_NE(rejection(R"({"prompt":[-5]})").find("-5"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[1099511627776]})").find("1099511627776"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[5, 2147483648]})").find("2147483648"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":[5, 1.5]})").find("1.5"), std::string::npos);
  const ApiRequest ok = parse_request(Endpoint::Completions, R"({"prompt":[0, 2147483647]})", 16);
  EXPECT_EQ(ok.prompt_ids, (std::vector<int32_t>{0, 2147483647}));
}

TEST(OpenAIProtocol, WrongTypesAnywhereAre400s) {
  EXPECT_NE(rejection(R"({"prompt":"hi","temperature":"hot"})").find("\"hot\""), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","max_tokens":3.5})").find("3.5"), std::string::npos);
  EXPECT_NE(rejection(R"({"prompt":"hi","top_p":7})").find("7"), std::string::npos);
  // A content part whose "type" is not a string reached nlohmann's value() and threw type_error.
  rejection(R"({"messages":[{"role":"user","content":[{"type":5}]}]})", Endpoint::Chat);
  rejection(R"({"messages":[{"role":"user","content":[{"type":"text","text":5}]}]})", Endpoint::Chat);
  // A very long value is quoted cut short, not whole.
  const std::string message = rejection(R"({"prompt":"hi","temperature":")" + std::string(10000, 'x') + "\"}");
  EXPECT_LT(message.size(), 200u);
}

}  // namespace
}  // namespace tandem::server
