// The SentencePiece encoder against llama.cpp's Llama-2 test vectors (ids must match
// exactly), with both the vocabulary-only GGUF and llama2.c's tokenizer.bin of the same
// vocab; round trips on UTF-8 samples; control tokens never produced; a random-bytes loop.
#include <random>

#include "tokenizer/spm_encoder.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

using testing::load_vectors;
using testing::shared_path;
using testing::TestVector;

void expect_vectors_pass(const Tokenizer& tokenizer, const std::vector<TestVector>& vectors) {
  for (const TestVector& vector : vectors) {
    EXPECT_EQ(tokenizer.encode(vector.text, /*add_bos=*/false), vector.ids) << "input: '" << vector.text << "'";
  }
}

TEST(LlamaSpm, GgufVocabMatchesVectors) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const std::vector<TestVector> vectors = load_vectors(testing::kLlamaSpmGguf);
  ASSERT_EQ(vectors.size(), 46u);
  expect_vectors_pass(testing::gguf_tokenizer(testing::kLlamaSpmGguf), vectors);
}

TEST(LlamaSpm, Llama2cTokenizerBinMatchesVectors) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  TANDEM_REQUIRE_SHARED(testing::kLlama2TokenizerBin);
  const Tokenizer tokenizer(vocab_from_llama2c(shared_path(testing::kLlama2TokenizerBin), 32000));
  expect_vectors_pass(tokenizer, load_vectors(testing::kLlamaSpmGguf));
}

TEST(LlamaSpm, GgufVocabFields) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  const Vocab& vocab = tokenizer.vocab();
  EXPECT_EQ(vocab.size(), 32000);
  EXPECT_EQ(vocab.bos_id, 1);
  EXPECT_EQ(vocab.eos_id, 2);
  EXPECT_EQ(vocab.unk_id, 0);
  EXPECT_EQ(vocab.types[1], TokenType::Control);
  EXPECT_EQ(vocab.types[13], TokenType::Byte);
  EXPECT_EQ(tokenizer.token_bytes(13), "\n");
  EXPECT_EQ(tokenizer.token_bytes(1), "");
  EXPECT_EQ(tokenizer.token_bytes(29871), " ");
  EXPECT_EQ(tokenizer.encode("Hello", true).front(), 1);
}

TEST(LlamaSpm, RoundTripsUtf8) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  const std::vector<std::string> samples = {
      "Hello world",
      " leading space",
      "   three leading spaces",
      "trailing spaces   ",
      "multiple    spaces\tand\ttabs",
      "line one\nline two\n\n\nend\n",
      "\n starts with a newline",
      "中文分词测试，这是一个句子。",
      "emoji 🦙🚀 and ZWJ 👨‍👩‍👧 sequence",
      "combining: e\u0301 a\u0308 n\u0303 \u0915\u093F",
      "Ελληνικά και русский текст",
      "mixed 123 4.5e-6 <s> </s> <0x0A> [INST]",
      " ",
      "  ",
      "\t",
      "x",
  };
  for (const std::string& text : samples) {
    const std::vector<int32_t> ids = tokenizer.encode(text, true);
    EXPECT_EQ(tokenizer.decode(ids), text) << "text: '" << text << "'";
    const std::vector<int32_t> no_bos = tokenizer.encode(text, false);
    EXPECT_EQ(tokenizer.decode(no_bos), text) << "text: '" << text << "'";
  }
}

TEST(LlamaSpm, ControlTokensNeverProduced) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  for (const char* text : {"<s></s>", "<s>", "</s>", " <s> hi </s> ", "<unk>"}) {
    const std::vector<int32_t> ids = tokenizer.encode(text, false);
    for (int32_t id : ids) {
      EXPECT_NE(tokenizer.vocab().types[id], TokenType::Control) << text;
      EXPECT_NE(id, tokenizer.vocab().unk_id) << text;
    }
    EXPECT_EQ(tokenizer.decode(ids), text);
  }
}

TEST(LlamaSpm, RandomBytesNeverCrash) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  std::mt19937 rng(12345);
  const std::vector<std::string> alphabet = {" ",        "a", "e", "\n", "\xE4\xB8\xAD", "\xF0\x9F\xA6\x99",
                                             "\xCC\x81", "<", ">", "s",  "\xE2\x96\x81"};
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string text;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0) {
        text += static_cast<char>(rng() % 256);  // anything, including invalid UTF-8
      } else {
        text += alphabet[rng() % alphabet.size()];
      }
    }
    const std::vector<int32_t> ids = tokenizer.encode(text, iteration % 2 == 0);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tokenizer.vocab().size());
    const std::string decoded = tokenizer.decode(ids);
    ASSERT_TRUE(testing::is_valid_utf8(decoded));
    // Valid text without "▁" (which decodes to a space) must come back exactly.
    if (testing::is_valid_utf8(text) && text.find("\xE2\x96\x81") == std::string::npos) {
      ASSERT_EQ(decoded, text);
    }
  }
}

TEST(LlamaSpm, LongPromptIsFast) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  std::string text;
  for (int i = 0; i < 4000; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  // Also one long unbroken run, the worst case for a quadratic merge loop.
  text += std::string(20000, 'a');
  const std::vector<int32_t> ids = tokenizer.encode(text, true);
  EXPECT_EQ(tokenizer.decode(ids), text);
}

// A long piece is merged in parts, cut where no piece can span the cut (spm_encoder.h): the
// ids must be those of merging it whole, for any part size, on text with runs of spaces
// (pieces of several "▁"), words, punctuation, CJK and invalid bytes.
TEST(LlamaSpm, LongTextEncodesTheSameInParts) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  const SpmEncoder whole(tokenizer.vocab(), SIZE_MAX);
  std::mt19937 rng(33);
  const std::vector<std::string> words = {"the",
                                          "quick",
                                          "brown",
                                          "fox",
                                          "jumps",
                                          "Hello",
                                          "world",
                                          "'s",
                                          "ing",
                                          "\xE4\xB8\xAD\xE6\x96\x87",
                                          "\xF0\x9F\xA6\x99",
                                          ",",
                                          ".",
                                          "\n",
                                          "1234",
                                          "a",
                                          "ab",
                                          "\xE2\x96\x81"};
  for (int round = 0; round < 20; ++round) {
    std::string text;
    while (text.size() < 6000) {
      text += words[rng() % words.size()];
      const unsigned spaces = rng() % 10 < 7 ? 1 : rng() % 12;  // mostly one space, sometimes a run
      text += std::string(spaces, ' ');
      if (rng() % 50 == 0) text += static_cast<char>(rng() % 256);
    }
    std::vector<int32_t> expected;
    whole.encode(text, true, expected, {});
    for (const size_t part : {size_t{16}, size_t{100}, size_t{1000}}) {
      std::vector<int32_t> ids;
      SpmEncoder(tokenizer.vocab(), part).encode(text, true, ids, {});
      ASSERT_EQ(ids, expected) << "round " << round << ", parts of " << part << " bytes";
    }
  }
}

}  // namespace
}  // namespace tandem
