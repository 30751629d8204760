// Byte-level BPE on llama.cpp's GPT-2 vocabulary: its test vectors exactly, round trips on
// fixed and random UTF-8, random bytes (invalid UTF-8 included) never crash, control tokens
// only when special parsing is asked for, streaming decode equal to a whole decode.
#include <random>

#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

using testing::kGpt2Gguf;

TEST(Gpt2Bpe, GgufVocabMatchesVectors) {
  TANDEM_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(kGpt2Gguf);
  const std::vector<testing::TestVector> vectors = testing::load_vectors(kGpt2Gguf);
  ASSERT_GT(vectors.size(), 30u);
  for (const testing::TestVector& vector : vectors) {
    EXPECT_EQ(tokenizer.encode(vector.text, /*add_bos=*/false), vector.ids) << "input: '" << vector.text << "'";
  }
}

TEST(Gpt2Bpe, GgufVocabFields) {
  TANDEM_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(kGpt2Gguf);
  const Vocab& vocab = tokenizer.vocab();
  EXPECT_EQ(vocab.kind, VocabKind::ByteLevelBpe);
  EXPECT_EQ(vocab.size(), 50257);
  EXPECT_EQ(vocab.merges.size(), 50000u);
  EXPECT_EQ(vocab.bos_id, 50256);
  EXPECT_EQ(vocab.eos_id, 50256);
  EXPECT_EQ(vocab.unk_id, -1);
  EXPECT_FALSE(vocab.add_bos);                  // gpt-2 has no BOS convention
  EXPECT_EQ(tokenizer.token_bytes(220), " ");   // "Ġ"
  EXPECT_EQ(tokenizer.token_bytes(198), "\n");  // "Ċ"
  EXPECT_EQ(tokenizer.token_bytes(50256), "");  // control
  EXPECT_EQ(tokenizer.encode("Hello world", false), (std::vector<int32_t>{15496, 995}));
}

TEST(Gpt2Bpe, RoundTripsUtf8Samples) {
  TANDEM_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(kGpt2Gguf);
  const std::vector<std::string> samples = {
      "Hello world",
      " leading space",
      "   three leading spaces",
      "trailing spaces   ",
      "multiple    spaces\tand\ttabs\r\n",
      "line one\nline two\n\n\nend\n",
      "\xE4\xB8\xAD\xE6\x96\x87\xE5\x88\x86\xE8\xAF\x8D\xEF\xBC\x8C\xE5\x8F\xA5\xE5\xAD\x90\xE3\x80\x82",
      "emoji \xF0\x9F\xA6\x99\xF0\x9F\x9A\x80 and ZWJ \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",
      "combining: e\xCC\x81 a\xCC\x88 n\xCC\x83 \xE0\xA4\x95\xE0\xA4\xBF",
      "I've won't they'll 1234567 3.14159 $$$ <|endoftext|>",
      "\xE2\x96\x81 SentencePiece marker stays a character",
      " ",
      "\t",
      "x",
  };
  for (const std::string& text : samples) {
    EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, false)), text) << "text: '" << text << "'";
  }
}

// Random valid UTF-8 from a mix of ASCII, Latin, CJK and astral code points.
std::string random_utf8(std::mt19937& rng, int n_chars) {
  static const std::vector<std::pair<uint32_t, uint32_t>> kRanges = {
      {0x20, 0x7E},     {0x09, 0x0D},     {0xA0, 0x24F},      {0x300, 0x36F},
      {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0x1F300, 0x1F6FF}, {0x10000, 0x10FFFF}};
  std::string out;
  for (int i = 0; i < n_chars; ++i) {
    const auto& [lo, hi] = kRanges[rng() % kRanges.size()];
    const uint32_t cp = lo + rng() % (hi - lo + 1);
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

TEST(Gpt2Bpe, RoundTripsRandomUtf8) {
  TANDEM_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(kGpt2Gguf);
  std::mt19937 rng(7);
  for (int iteration = 0; iteration < 500; ++iteration) {
    const std::string text = random_utf8(rng, static_cast<int>(rng() % 40));
    ASSERT_TRUE(testing::is_valid_utf8(text));
    ASSERT_EQ(tokenizer.decode(tokenizer.encode(text, false)), text);
  }
}

TEST(Gpt2Bpe, RandomBytesNeverCrash) {
  TANDEM_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(kGpt2Gguf);
  std::mt19937 rng(99);
  const std::vector<std::string> alphabet = {
      " ", "a", "'s", "\n", "1", "\xE4\xB8\xAD", "\xF0\x9F\xA6\x99", "\xCC\x81", "<|endoftext|>"};
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::string text;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0) {
        text += static_cast<char>(rng() % 256);  // anything, including invalid UTF-8
      } else {
        text += alphabet[rng() % alphabet.size()];
      }
    }
    const std::vector<int32_t> ids = tokenizer.encode(text, false, iteration % 2 == 0);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tokenizer.vocab().size());
    const std::string decoded = tokenizer.decode(ids);
    ASSERT_TRUE(testing::is_valid_utf8(decoded));
    // Byte-level BPE keeps every byte: valid text without special markup comes back exactly.
    if (testing::is_valid_utf8(text) && iteration % 2 == 1) {
      ASSERT_EQ(decoded, text);
    }
    // Bytes are bytes: the ids' raw bytes always equal the input, valid or not.
    std::string raw;
    for (int32_t id : tokenizer.encode(text, false)) raw += tokenizer.token_bytes(id);
    ASSERT_EQ(raw, text);
  }
}

TEST(Gpt2Bpe, SpecialTokensOnlyWhenAllowed) {
  TANDEM_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(kGpt2Gguf);
  const std::string text = "Hello<|endoftext|> world";
  const std::vector<int32_t> plain = tokenizer.encode(text, false);
  for (int32_t id : plain) EXPECT_NE(id, 50256);
  EXPECT_EQ(tokenizer.decode(plain), text);
  EXPECT_EQ(tokenizer.encode(text, false, /*parse_special=*/true), (std::vector<int32_t>{15496, 50256, 995}));
  EXPECT_EQ(tokenizer.encode("<|endoftext|>", false, true), std::vector<int32_t>{50256});
  // add_bos with a BOS id present prepends it even though the vocab does not ask for one.
  EXPECT_EQ(tokenizer.encode("Hello", true).front(), 50256);
}

TEST(Gpt2Bpe, StreamingEqualsDecode) {
  TANDEM_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(kGpt2Gguf);
  std::mt19937 rng(5);
  // Emoji and CJK text: their bytes are spread over several byte-level tokens.
  const std::string text = "\xF0\x9F\xA6\x99\xF0\x9F\x9A\x80 \xE4\xB8\xAD\xE6\x96\x87 ok";
  std::vector<std::vector<int32_t>> sequences = {tokenizer.encode(text, false)};
  for (int i = 0; i < 50; ++i) {
    std::vector<int32_t> ids;
    for (int k = 0; k < 20; ++k) ids.push_back(static_cast<int32_t>(rng() % 50257));
    sequences.push_back(ids);
  }
  for (const std::vector<int32_t>& ids : sequences) {
    StreamingDetokenizer stream(tokenizer);
    std::string streamed;
    for (int32_t id : ids) {
      const std::string out = stream.push(id);
      ASSERT_TRUE(testing::is_valid_utf8(out));
      streamed += out;
    }
    streamed += stream.finish();
    ASSERT_EQ(streamed, tokenizer.decode(ids));
  }
}

TEST(Gpt2Bpe, LongPromptIsFast) {
  TANDEM_REQUIRE_SHARED(kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(kGpt2Gguf);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "The quick brown fox jumps over the lazy dog. ";
  text += std::string(20000, 'a');  // one long pre-token: the worst case for merging
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(text, false)), text);
}

}  // namespace
}  // namespace tandem
