// Shared helpers for the tokenizer tests: paths into ../shared (tests skip when it is absent),
// loaders for the test vocabularies and llama.cpp's .inp/.out vectors, a UTF-8 validity check.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "io/gguf_file.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tandem::testing {

inline std::string shared_path(const std::string& relative) {
  return std::string(TANDEM_SHARED_DIR) + "/" + relative;
}

inline const char* kLlamaSpmGguf = "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf";
inline const char* kGpt2Gguf = "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
inline const char* kLlama2TokenizerBin = "tokenizers/llama2/tokenizer.bin";
inline const char* kAidreamsDir = "models/aidreams260K";

// Skips the current test (with the reason) when a file from ../shared is missing.
#define TANDEM_REQUIRE_SHARED(relative)                                               \
  do {                                                                                \
    if (!std::filesystem::exists(::tandem::testing::shared_path(relative))) {         \
      GTEST_SKIP() << "shared data missing: " << ::tandem::testing::shared_path(relative); \
    }                                                                                 \
  } while (0)

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline Tokenizer gguf_tokenizer(const std::string& relative) {
  return Tokenizer(vocab_from_gguf(GgufFile::open(shared_path(relative))));
}

struct TestVector {
  std::string text;
  std::vector<int32_t> ids;
};

// llama.cpp's vectors beside a vocab GGUF. .inp: each input is followed by
// "\n__ggml_vocab_test__\n"; .out: one line of ids per input.
inline std::vector<TestVector> load_vectors(const std::string& gguf_relative) {
  const std::string inputs = read_file(shared_path(gguf_relative) + ".inp");
  const std::string outputs = read_file(shared_path(gguf_relative) + ".out");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<TestVector> vectors;
  for (size_t pos = 0; pos < inputs.size();) {
    const size_t end = inputs.find(separator, pos);
    EXPECT_NE(end, std::string::npos) << "input not terminated by the separator";
    if (end == std::string::npos) break;
    vectors.push_back({inputs.substr(pos, end - pos), {}});
    pos = end + separator.size();
  }
  std::istringstream lines(outputs);
  std::string line;
  for (TestVector& vector : vectors) {
    EXPECT_TRUE(std::getline(lines, line)) << "fewer output lines than inputs";
    std::istringstream numbers(line);
    for (int32_t id; numbers >> id;) vector.ids.push_back(id);
  }
  return vectors;
}

// Written independently of src/tokenizer/utf8.cpp (decode code points, then check ranges),
// so the sanitizer is not checked against itself.
inline bool is_valid_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto b0 = static_cast<unsigned char>(text[i]);
    int n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > text.size()) return false;
    uint32_t cp = n == 1 ? b0 : b0 & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if ((b >> 6) != 2) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace tandem::testing
