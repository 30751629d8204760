// Shared helpers for the tokenizer tests: the test vocabularies' paths in ../shared (tests
// skip when it is absent: support/shared_data.h), loaders for them and for llama.cpp's
// .inp/.out vectors, a UTF-8 validity check.
#pragma once

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "io/gguf_file.h"
#include "support/shared_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tandem::testing {

inline const char* kLlamaSpmGguf = "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf";
inline const char* kGpt2Gguf = "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
inline const char* kLlama2TokenizerBin = "tokenizers/llama2/tokenizer.bin";
inline const char* kAidreamsDir = "models/aidreams260K";

inline Tokenizer gguf_tokenizer(const std::string& relative) {
  return Tokenizer(vocab_from_gguf(GgufFile::open(shared_path(relative))));
}

// `vocab` with each of `pieces` a control token: existing pieces change type, new ones are
// appended. The GPT-2 vocabulary plus ChatML's or Llama 3's turn markers stands in for a Qwen
// or Llama 3 vocabulary (byte-level BPE with added control tokens) where those are missing.
inline Vocab with_control_tokens(Vocab vocab, const std::vector<std::string>& pieces) {
  for (const std::string& piece : pieces) {
    const auto it = std::find(vocab.pieces.begin(), vocab.pieces.end(), piece);
    if (it != vocab.pieces.end()) {
      vocab.types[static_cast<size_t>(it - vocab.pieces.begin())] = TokenType::Control;
      continue;
    }
    vocab.pieces.push_back(piece);
    vocab.scores.push_back(0);
    vocab.types.push_back(TokenType::Control);
  }
  return vocab;
}

inline int32_t id_of_piece(const Tokenizer& tokenizer, std::string_view piece) {
  const auto& pieces = tokenizer.vocab().pieces;
  const auto it = std::find(pieces.begin(), pieces.end(), piece);
  return it == pieces.end() ? -1 : static_cast<int32_t>(it - pieces.begin());
}

inline size_t count_control_ids(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  return static_cast<size_t>(std::count_if(ids.begin(), ids.end(), [&](int32_t id) {
    return tokenizer.vocab().types[static_cast<size_t>(id)] == TokenType::Control;
  }));
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
