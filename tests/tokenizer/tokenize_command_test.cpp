// End to end: runs the `tandem tokenize` binary and checks the ids it prints, with -p and
// with the text on stdin (verbatim, binary-safe), on SentencePiece and GPT-2 GGUFs and on
// tokenizer.json files and folders.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "io/gguf_writer.h"
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
  const std::string out =
      run_command(fmt::format("'{}' tokenize -m '{}' -p ' Hello, world!' --no-bos", TANDEM_BINARY, vocab), status);
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
  const std::string out =
      run_command(fmt::format("printf '\\t\\n' | '{}' tokenize -m '{}' --no-bos", TANDEM_BINARY, vocab), status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "29871 12 13\n");
}

TEST(TokenizeCommand, Llama2cModelFindsItsTokenizer) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.bin");
  int status = 0;
  const std::string out = run_command(fmt::format("'{}' tokenize -m '{}' -p 'The dream'", TANDEM_BINARY,
                                                  testing::shared_path("models/aidreams260K/model.bin")),
                                      status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "1 368 430 281 269 435 447\n");
}

TEST(TokenizeCommand, Gpt2VocabWithoutBos) {
  TANDEM_REQUIRE_SHARED(testing::kGpt2Gguf);
  int status = 0;
  // gpt-2 has add_bos_token unset (false): no BOS unless the vocab asks for one.
  const std::string out = run_command(
      fmt::format("'{}' tokenize -m '{}' -p 'Hello world'", TANDEM_BINARY, testing::shared_path(testing::kGpt2Gguf)),
      status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out, "15496 995\n");
  const std::string special = run_command(fmt::format("'{}' tokenize -m '{}' --special -p 'Hello<|endoftext|>'",
                                                      TANDEM_BINARY, testing::shared_path(testing::kGpt2Gguf)),
                                          status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(special, "15496 50256\n");
}

TEST(TokenizeCommand, TokenizerJsonAndFolder) {
  const std::string dir = ::testing::TempDir() + "tandem_tokenize_json";
  std::filesystem::create_directories(dir);
  // A three-letter byte-level vocabulary: "a", "b", "ab" and the merge that makes it.
  {
    std::ofstream(dir + "/tokenizer.json")
        << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3},
               "merges": ["a b"]},
               "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false}})";
  }
  int status = 0;
  for (const std::string& path : {dir, dir + "/tokenizer.json"}) {
    const std::string out = run_command(fmt::format("'{}' tokenize -m '{}' -p 'ab ab'", TANDEM_BINARY, path), status);
    EXPECT_EQ(status, 0);
    EXPECT_EQ(out, "2 3 2\n") << path;
  }
  std::filesystem::remove_all(dir);
}

TEST(TokenizeCommand, BadVocabFailsWithOneLine) {
  const std::string path = ::testing::TempDir() + "tandem_bad_vocab.gguf";
  GgufWriter writer;
  writer.set("tokenizer.ggml.model", GgufValue::string("bert"));
  writer.write(path);
  int status = 0;
  const std::string out = run_command(fmt::format("'{}' tokenize -m '{}' -p hi 2>&1", TANDEM_BINARY, path), status);
  EXPECT_EQ(status, 1);
  EXPECT_NE(out.find("bert"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tandem
