// /v1/responses end to end with real npm clients (responses_client_test.mjs): the `openai`
// SDK's responses.create / responses.stream and the Vercel AI SDK's default OpenAI provider,
// against `tandem serve` on a random-weight model with the Llama 2 vocabulary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "generated_tiny_model.h"
#include "npm_packages.h"
#include "server_process.h"

namespace tandem::testing {
namespace {

const char* const kLlamaSpmVocab = "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf";
const char* const kNpmDir = "npm-responses";

const std::string& random_model_path() {
  static const GeneratedTinyModel model("tandem-responses-client", shared_path(kLlamaSpmVocab));
  return model.path();
}

void run_part(const std::string& part) {
  TANDEM_REQUIRE_SHARED(kLlamaSpmVocab);
  std::string why;
  if (!ensure_npm_packages(kNpmDir, {"openai@7", "ai@7", "@ai-sdk/openai@4"}, why)) GTEST_SKIP() << why << "; skipping";
  ASSERT_FALSE(random_model_path().empty()) << "gen-model failed";
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "2"}, 60.0, random_model_path())) << server.log();
  const std::string model_id = std::filesystem::path(random_model_path()).filename().string();
  const std::string script = (std::filesystem::path(__FILE__).parent_path() / "responses_client_test.mjs").string();
  const std::string command = "timeout 240 node '" + script + "' --npm '" + npm_cache_dir(kNpmDir) + "' --url " +
                              server.url() + " --model '" + model_id + "' --part " + part;
  const int status = std::system(command.c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : 128, 0) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

TEST(ResponsesClient, OpenAISdkCreateToolsJsonSchemaAndStream) { run_part("openai"); }

TEST(ResponsesClient, VercelAiSdkDefaultProviderTextToolsStreamAndObject) { run_part("aisdk"); }

}  // namespace
}  // namespace tandem::testing
