// Structured output and tool calling end to end: `tandem serve` on a random-weight model with
// the Llama 2 vocabulary (32k tokens, from ../shared/tokenizers), driven by the official
// `openai` npm client v7 with zod 3/4 (structured_output_client_test.mjs), its answers checked
// by zod and by Ajv (with ajv-formats for the string formats).
// Random weights write noise unconstrained, so valid JSON and valid calls are the grammar's.
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

// A test-tiny model with the 32k Llama 2 vocabulary, written once per test process.
const std::string& random_model_path() {
  static const GeneratedTinyModel model("tandem-structured", shared_path(kLlamaSpmVocab));
  return model.path();
}

int run_client(const std::string& url, const std::string& model_id, const std::string& part) {
  const std::string script =
      (std::filesystem::path(__FILE__).parent_path() / "structured_output_client_test.mjs").string();
  const std::string command = "timeout 240 node '" + script + "' --npm '" + npm_cache_dir("npm7") + "' --url " + url +
                              " --model '" + model_id + "' --part " + part;
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

void run_part(const std::string& part) {
  TANDEM_REQUIRE_SHARED(kLlamaSpmVocab);
  std::string why;
  if (!ensure_npm_packages("npm7", {"openai@7", "ajv@8", "ajv-formats@3", "zod@3"}, why))
    GTEST_SKIP() << why << "; skipping";
  ASSERT_FALSE(random_model_path().empty()) << "gen-model failed";
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "4"}, 60.0, random_model_path())) << server.log();
  const std::string model_id = std::filesystem::path(random_model_path()).filename().string();
  EXPECT_EQ(run_client(server.url(), model_id, part), 0) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

TEST(StructuredOutputClient, FiftyRandomSchemasGiveValidJson) { run_part("schemas"); }

TEST(StructuredOutputClient, RequiredAndNamedToolCallsStreamedAndRunTools) { run_part("tools"); }

// zodResponseFormat / zodFunction with .int(), .min(), .max(), .regex(), .email(), bounded
// arrays (zod 3 and zod 4), checked by zod and by Ajv with ajv-formats; guided_regex and
// structured_outputs through the SDK.
TEST(StructuredOutputClient, ZodSchemasThroughTheSdkHelpers) { run_part("zod"); }

// max_tokens cutting a forced reply after complete calls keeps those calls.
TEST(StructuredOutputClient, ForcedCallsCutByMaxTokensKeepTheCompleteOnes) { run_part("cut"); }

// The AI SDK's generateObject and LangChain's withStructuredOutput (jsonSchema,
// functionCalling, jsonMode) with the same zod schemas (structured_output_clients_test.mjs).
TEST(StructuredOutputClient, AiSdkGenerateObjectAndLangChainWithStructuredOutput) {
  TANDEM_REQUIRE_SHARED(kLlamaSpmVocab);
  std::string why;
  if (!ensure_npm_packages("npm-clients",
                           {"ai@6", "@ai-sdk/openai-compatible@1", "@langchain/openai@1", "@langchain/core@1", "zod@3",
                            "zod-to-json-schema@3", "ajv@8", "ajv-formats@3"},
                           why))
    GTEST_SKIP() << why << "; skipping";
  ASSERT_FALSE(random_model_path().empty()) << "gen-model failed";
  ServerProcess server;
  ASSERT_TRUE(server.start({"--parallel", "4"}, 60.0, random_model_path())) << server.log();
  const std::string model_id = std::filesystem::path(random_model_path()).filename().string();
  const std::string script =
      (std::filesystem::path(__FILE__).parent_path() / "structured_output_clients_test.mjs").string();
  const std::string command = "timeout 240 node '" + script + "' --npm '" + npm_cache_dir("npm-clients") + "' --url " +
                              server.url() + " --model '" + model_id + "'";
  const int status = std::system(command.c_str());
  EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : 128, 0) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

}  // namespace
}  // namespace tandem::testing
