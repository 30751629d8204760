// POST /v1/embeddings: the request/response functions (embeddings_api.h) without sockets, then
// the real `tandem serve` on loopback driven by the official openai npm client
// (embeddings_client_test.mjs) and by plain HTTP for --pooling last and malformed bodies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "aidreams_tokenizer.h"
#include "model/model.h"
#include "npm_packages.h"
#include "server/embeddings_api.h"
#include "server/openai_protocol.h"
#include "server_process.h"

namespace tandem::testing {
namespace {

using nlohmann::json;
using server::ApiError;

void expect_400(const std::string& body, const std::string& reason) {
  try {
    server::parse_embeddings_request(body, aidreams_tokenizer(), 64, 128, 4);
    ADD_FAILURE() << body << ": accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << body << ": " << e.what();
  }
}

TEST(EmbeddingsApi, InputShapesAndRefusals) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const Tokenizer& tokenizer = aidreams_tokenizer();
  const auto one = server::parse_embeddings_request(R"({"input": "I see"})", tokenizer, 64, 128, 4);
  ASSERT_EQ(one.inputs.size(), 1u);
  EXPECT_EQ(one.inputs[0], tokenizer.encode("I see", tokenizer.vocab().add_bos));
  EXPECT_FALSE(one.base64);
  const auto many = server::parse_embeddings_request(
      R"({"input": ["a", [1, 2, 3]], "model": "m", "encoding_format": "base64", "dimensions": 64})", tokenizer, 64, 128,
      4);
  ASSERT_EQ(many.inputs.size(), 2u);
  EXPECT_EQ(many.inputs[1], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(many.model, "m");
  EXPECT_TRUE(many.base64);
  const auto ids = server::parse_embeddings_request(R"({"input": [5, 6]})", tokenizer, 64, 128, 4);
  EXPECT_EQ(ids.inputs, (std::vector<std::vector<int32_t>>{{5, 6}}));
  expect_400(R"({})", "'input' is required");
  expect_400(R"({"input": 3})", "'input' must be");
  expect_400(R"({"input": []})", "'input' must be");
  expect_400(R"({"input": [[]]})", "input 0 is empty");
  expect_400(R"({"input": ""})", "'input' is an empty string");
  expect_400(R"({"input": ["a", ""]})", "'input[1]' is an empty string");
  expect_400(R"({"input": [1, 99999]})", "outside the vocabulary");
  expect_400(R"({"input": [{"a": 1}]})", "'input[0]' must be");
  expect_400(R"({"input": "x", "encoding_format": "int8"})", "encoding_format");
  expect_400(R"({"input": "x", "dimensions": 32})", "dimensions");
  expect_400(R"({"input": ["a", "b", "c", "d", "e"]})", "at most 4");
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += "dream ";
  expect_400(json{{"input", long_text}}.dump(), "context");
  expect_400("{oops", "not valid JSON");
}

TEST(EmbeddingsApi, NormalisedVectorsAndBase64AsLittleEndianFloat32) {
  std::vector<float> v = {3.0f, 4.0f};
  server::normalize_l2(v);
  EXPECT_FLOAT_EQ(v[0], 0.6f);
  EXPECT_FLOAT_EQ(v[1], 0.8f);
  std::vector<float> zeros = {0.0f, 0.0f};
  server::normalize_l2(zeros);
  EXPECT_EQ(zeros, (std::vector<float>{0.0f, 0.0f}));
  // 1.0f is 00 00 80 3F; 1.0f, 2.0f (00 00 00 40) is 8 bytes: base64 of both by hand.
  const json one = server::embeddings_response_json({{1.0f}}, true, "m", 3);
  EXPECT_EQ(one["data"][0]["embedding"], "AACAPw==");
  const json two = server::embeddings_response_json({{1.0f, 2.0f}}, true, "m", 3);
  EXPECT_EQ(two["data"][0]["embedding"], "AACAPwAAAEA=");
  const json plain = server::embeddings_response_json({{0.5f}, {0.25f}}, false, "m", 7);
  EXPECT_EQ(plain["object"], "list");
  EXPECT_EQ(plain["data"][1]["index"], 1);
  EXPECT_EQ(plain["data"][1]["embedding"], json::array({0.25}));
  EXPECT_EQ(plain["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(plain["model"], "m");
}

httplib::Result post(httplib::Client& client, const json& body) {
  return client.Post("/v1/embeddings", body.dump(), "application/json");
}

TEST(EmbeddingsServer, OpenAIClientShapesNormsBatchesAndErrors) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  std::string why;
  if (!ensure_npm_packages("npm", {"openai@4"}, why)) GTEST_SKIP() << why << "; skipping";
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2", "--max-batch-tokens", "16"})) << server.log();
  const int64_t d_model = load_model(shared_path(kAidreamsGguf))->config.d_model;
  const std::string script = (std::filesystem::path(__FILE__).parent_path() / "embeddings_client_test.mjs").string();
  const std::string command = "timeout 60 node '" + script + "' --openai '" + npm_cache_dir("npm") + "' --url " +
                              server.url() + " --model model.gguf --dims " + std::to_string(d_model);
  const int status = std::system(command.c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : 128, 0) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

TEST(EmbeddingsServer, MeanAndLastPoolingDifferAndBothAreUnitVectors) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  std::vector<std::vector<double>> vectors;
  for (const char* pooling : {"mean", "last"}) {
    ServerProcess server;
    ASSERT_TRUE(server.start({"--pooling", pooling})) << server.log();
    httplib::Client client = server.client();
    const auto res = post(client, {{"input", "The dream of a quiet sea"}});
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json body = json::parse(res->body);
    vectors.push_back(body["data"][0]["embedding"].get<std::vector<double>>());
    double sum_sq = 0.0;
    for (double x : vectors.back()) sum_sq += x * x;
    EXPECT_NEAR(sum_sq, 1.0, 1e-5) << pooling;
    const auto refused = post(client, {{"input", json::array()}});
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 400) << refused->body;
    EXPECT_EQ(server.stop(), 0);
  }
  double dot = 0.0;
  for (size_t i = 0; i < vectors[0].size(); ++i) dot += vectors[0][i] * vectors[1][i];
  EXPECT_LT(dot, 0.999);  // mean over positions is not the last position
  ServerProcess bad;
  ASSERT_TRUE(bad.spawn({"serve", "-m", shared_path(kAidreamsGguf), "--port", "0", "--pooling", "max"}));
  const std::optional<int> code = bad.wait_exit(30.0);
  ASSERT_TRUE(code.has_value()) << "still running";
  EXPECT_NE(*code, 0) << bad.log();
  EXPECT_NE(bad.log().find("--pooling"), std::string::npos) << bad.log();
}

}  // namespace
}  // namespace tandem::testing
