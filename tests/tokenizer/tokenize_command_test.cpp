// End to end: runs the `tandem tokenize` binary and checks the ids it prints, with -p and
// with the text on stdin (verbatim, binary-safe).
#include <sys/wait.h>

#include <cstdio>

#include "tokenizer_test_util.h"

namespace tandem {
namespace {

// Runs `command` through the shell; returns its stdout and sets `status` to its exit code.
std::string run_command(const std::string& command, int& status) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    status = -1;
    return "";
  }
  std::string out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int raw = ::pclose(pipe);
  status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return out;
}

TEST(TokenizeCommand, PrintsIdsForVocabOnlyGguf) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const std::string vocab = testing::shared_path(testing::kLlamaSpmGguf);
  int status = 0;
  const std::string out = run_command(
      fmt::format("'{}' tokenize -m '{}' -p ' Hello, world!' --no-bos", TANDEM_BINARY, vocab),
      status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "29871 15043 29892 3186 29991\n");

  const std::string with_bos =
      run_command(fmt::format("'{}' tokenize -m '{}' -p 'Hello world'", TANDEM_BINARY, vocab), status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(with_bos, "1 15043 3186\n");
}

TEST(TokenizeCommand, ReadsStdinVerbatim) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const std::string vocab = testing::shared_path(testing::kLlamaSpmGguf);
  int status = 0;
  // "\t\n" from the vectors: nothing may be trimmed.
  const std::string out = run_command(
      fmt::format("printf '\\t\\n' | '{}' tokenize -m '{}' --no-bos", TANDEM_BINARY, vocab), status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "29871 12 13\n");
}

TEST(TokenizeCommand, Llama2cModelFindsItsTokenizer) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.bin");
  int status = 0;
  const std::string out = run_command(
      fmt::format("'{}' tokenize -m '{}' -p 'The dream'", TANDEM_BINARY,
                  testing::shared_path("models/aidreams260K/model.bin")),
      status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "1 368 430 281 269 435 447\n");
}

TEST(TokenizeCommand, BadVocabFailsWithOneLine) {
  TANDEM_REQUIRE_SHARED("tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf");
  int status = 0;
  const std::string out = run_command(
      fmt::format("'{}' tokenize -m '{}' -p hi 2>&1", TANDEM_BINARY,
                  testing::shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf")),
      status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(out.find("gpt2"), std::string::npos) << out;
}

}  // namespace
}  // namespace tandem
