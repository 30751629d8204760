// Bad input through the CLI: each case must end with exit code 1 and exactly one line on
// stderr that names the problem — never a crash, a hang or a sanitizer report.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "support/run_binary.h"

// GCC defines __SANITIZE_ADDRESS__/__SANITIZE_THREAD__; clang says so through __has_feature.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TANDEM_CLANG_SANITIZER 1
#endif
#endif
#ifndef TANDEM_CLANG_SANITIZER
#define TANDEM_CLANG_SANITIZER 0
#endif

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tandem-bad-input-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write_file(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path.string();
  }

  // Expects a clean failure whose single stderr line contains `needle`.
  static void expect_clean_error(const CommandResult& result, const std::string& needle) {
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_EQ(result.err.rfind("tandem: error: ", 0), 0u) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_NE(result.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << result.err;
  }

  fs::path dir_;
};

TEST_F(BadInput, MissingModelFile) {
  expect_clean_error(run_tandem("run -m /nonexistent/model.gguf -p hi"), "/nonexistent/model.gguf");
}

TEST_F(BadInput, TruncatedGguf) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const std::string whole = read_text_file(shared_path("models/aidreams260K/model.gguf"));
  for (size_t cut : {size_t{0}, size_t{3}, size_t{10}, size_t{100}, size_t{5000}, whole.size() / 2, whole.size() - 1}) {
    const std::string path = write_file("truncated.gguf", whole.substr(0, cut));
    const CommandResult result = run_tandem("run -m " + shell_quote(path) + " -p hi -n 4");
    expect_clean_error(result, "truncated.gguf");
  }
}

TEST_F(BadInput, WrongMagic) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  std::string bytes = read_text_file(shared_path("models/aidreams260K/model.gguf"));
  bytes[0] = 'X';
  expect_clean_error(run_tandem("run -m " + shell_quote(write_file("magic.gguf", bytes)) + " -p hi"), "magic.gguf");
}

TEST_F(BadInput, TruncatedLlama2cCheckpoint) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.bin");
  const std::string whole = read_text_file(shared_path("models/aidreams260K/model.bin"));
  const std::string path = write_file("model.bin", whole.substr(0, whole.size() / 3));
  expect_clean_error(run_tandem("run -m " + shell_quote(path) + " -z " +
                                shell_quote(shared_path("models/aidreams260K/tok512.bin")) + " -p hi"),
                     "truncated");
}

TEST_F(BadInput, AbsurdLlama2cHeader) {
  // dim, hidden, layers, heads, kv heads, vocab, seq_len: sizes whose product overflows.
  const int32_t header[7] = {1 << 23, 1 << 23, 1 << 23, 1 << 10, 1 << 10, 1 << 23, 1 << 23};
  const std::string path = write_file("absurd.bin", std::string(reinterpret_cast<const char*>(header), sizeof(header)));
  expect_clean_error(run_tandem("info -m " + shell_quote(path)), "absurd.bin");
}

// A llama GGUF whose tensors are described but whose shapes or types are wrong.
std::string tiny_llama_gguf(DType matrix_type, int64_t embedding_rows) {
  GgufWriter writer;
  writer.set("general.architecture", GgufValue::string("llama"));
  writer.set("llama.embedding_length", GgufValue::u32(256));
  writer.set("llama.block_count", GgufValue::u32(1));
  writer.set("llama.feed_forward_length", GgufValue::u32(256));
  writer.set("llama.attention.head_count", GgufValue::u32(4));
  writer.set("llama.context_length", GgufValue::u32(64));
  auto add = [&](const std::string& name, DType type, std::vector<int64_t> shape) {
    int64_t elements = 1;
    for (int64_t extent : shape) elements *= extent;
    writer.add_tensor(name, type, shape, std::vector<uint8_t>(static_cast<size_t>(dtype_row_bytes(type, elements))));
  };
  add("token_embd.weight", matrix_type, {embedding_rows, 256});
  add("output_norm.weight", DType::F32, {256});
  for (const char* name : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    add(std::string("blk.0.") + name + ".weight", matrix_type, {256, 256});
  add("blk.0.attn_norm.weight", DType::F32, {256});
  add("blk.0.ffn_norm.weight", DType::F32, {256});
  const std::vector<uint8_t> bytes = writer.to_bytes();
  return std::string(bytes.begin(), bytes.end());
}

TEST_F(BadInput, UnsupportedTensorType) {
  // Q4_1 is a valid GGUF type that Tandem does not run.
  const std::string path = write_file("q4_1.gguf", tiny_llama_gguf(DType::Q4_1, 32));
  expect_clean_error(run_tandem("info -m " + shell_quote(path)), "Q4_1");
}

TEST_F(BadInput, AbsurdTensorSize) {
  // Claims a 2^40-row embedding: its data cannot be in the file.
  std::string bytes = tiny_llama_gguf(DType::F32, 32);
  const std::string path = write_file("huge.gguf", bytes);
  GgufFile parsed = GgufFile::open(path);
  ASSERT_NE(parsed.find_tensor("token_embd.weight"), nullptr);
  // Patch the u64 outer dimension (32) of token_embd in the tensor-info table.
  const std::string name = "token_embd.weight";
  const size_t at = bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const size_t outer_dim_at = at + name.size() + 4 + 8;  // after name, n_dims (u32), ne[0] (u64)
  const uint64_t huge = uint64_t{1} << 40;
  bytes.replace(outer_dim_at, 8, std::string(reinterpret_cast<const char*>(&huge), 8));
  expect_clean_error(run_tandem("info -m " + shell_quote(write_file("huge.gguf", bytes))), "huge.gguf");
}

TEST_F(BadInput, PromptLongerThanContext) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  std::string prompt;
  for (int i = 0; i < 200; ++i) prompt += "dream ";
  expect_clean_error(
      run_tandem("run -m " + shell_quote(shared_path("models/aidreams260K/model.gguf")) + " -p " + shell_quote(prompt)),
      "context");
}

// A KV pool larger than the machine is refused before anything is allocated, naming the pool
// and the flag (not a bare "out of memory" from wherever the first large allocation failed).
TEST_F(BadInput, KvPoolLargerThanTheMachine) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
  const std::string model = shell_quote(shared_path("models/aidreams260K/model.gguf"));
  expect_clean_error(run_tandem("run -m " + model + " -p hi -n 4 --kv-memory 100TiB"), "--kv-memory");
  expect_clean_error(run_tandem("run -m " + model + " -p hi -n 4 --kv-memory 100TiB"), "machine's memory");
}

// An allocation that fails anyway (here a 1 GiB KV pool under a 300 MB address-space limit,
// which the machine-size check lets through) says how much the process held of how much there
// is, and the limit, in one line.
TEST_F(BadInput, OutOfMemorySaysWhatTheProcessHeldAndTheLimit) {
  TANDEM_REQUIRE_SHARED("models/aidreams260K/model.gguf");
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || TANDEM_CLANG_SANITIZER
  GTEST_SKIP() << "a sanitizer's shadow memory needs more address space than the limit this test sets";
#else
  const std::string err_path = (dir_ / "err").string();
  const std::string command = "ulimit -v 300000; " + shell_quote(TANDEM_BINARY) + " run -m " +
                              shell_quote(shared_path("models/aidreams260K/model.gguf")) +
                              " -p hi -n 2 --kv-memory 1GiB > /dev/null 2> " + shell_quote(err_path) + " < /dev/null";
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.err = read_text_file(err_path);
  expect_clean_error(result, "out of memory: this process held ");
  EXPECT_NE(result.err.find("under an address-space limit of 293.0 MiB"), std::string::npos) << result.err;
#endif
}

TEST_F(BadInput, Llama2cModelWithoutTokenizer) {
  TANDEM_REQUIRE_SHARED("models/stories260K/model.bin");
  const std::string path = write_file("model.bin", read_text_file(shared_path("models/stories260K/model.bin")));
  expect_clean_error(run_tandem("run -m " + shell_quote(path) + " -p hi"), "tokenizer");
}

}  // namespace
}  // namespace tandem::testing
