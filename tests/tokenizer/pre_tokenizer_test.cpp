// The PCRE2 pre-tokenizer: the named splits on hand-checked examples (contractions, digit
// grouping, look-ahead on spaces, DeepSeek's regex sequence), full coverage of any bytes,
// and clear errors for unknown names and broken patterns. No ../shared needed.
#include <random>

#include "base/error.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(const std::string& pre, const std::string& text) {
  const PreTokenizer pre_tokenizer(pre_tokenizer_regexes(pre));
  Pieces out;
  for (std::string_view piece : pre_tokenizer.split(text)) out.emplace_back(piece);
  return out;
}

TEST(PreTokenizer, Gpt2) {
  EXPECT_EQ(split("gpt-2", "Hello world's  123 !!"), (Pieces{"Hello", " world", "'s", " ", " 123", " !!"}));
  // \s+(?!\S): the last space of a run stays with the following word.
  EXPECT_EQ(split("default", "a   b\n"), (Pieces{"a", "  ", " b", "\n"}));
  EXPECT_EQ(split("gpt-2", ""), Pieces{});
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(split("llama-bpe", "12345 abc\n\nx"), (Pieces{"123", "45", " abc", "\n\n", "x"}));
  EXPECT_EQ(split("llama3", "DON'T stop"), (Pieces{"DON", "'T", " stop"}));
  EXPECT_EQ(split("llama-bpe", "(hi)"), (Pieces{"(hi", ")"}));
}

TEST(PreTokenizer, Qwen2SplitsSingleDigits) {
  EXPECT_EQ(split("qwen2", "x 2024"), (Pieces{"x", " ", "2", "0", "2", "4"}));
}

TEST(PreTokenizer, DeepSeekCoderSequence) {
  EXPECT_EQ(split("deepseek-coder", "ab12\n"), (Pieces{"ab", "1", "2", "\n"}));
  // Chinese is letters (\p{L}) before the CJK step ever sees it.
  EXPECT_EQ(split("deepseek-coder", "\xE4\xB8\xAD\xE6\x96\x87!"), (Pieces{"\xE4\xB8\xAD\xE6\x96\x87", "!"}));
}

TEST(PreTokenizer, DeepSeekLlmSequence) {
  EXPECT_EQ(split("deepseek-llm", "Hi, 42\n"), (Pieces{"Hi", ",", " ", "42", "\n"}));
  // Uncased letters (CJK) are left for the CJK step.
  EXPECT_EQ(split("deepseek-llm", "a\xE4\xB8\xAD\xE6\x96\x87"), (Pieces{"a", "\xE4\xB8\xAD\xE6\x96\x87"}));
}

TEST(PreTokenizer, PiecesCoverAnyBytes) {
  std::mt19937 rng(3);
  for (const char* pre :
       {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3", "starcoder", "tekken"}) {
    const PreTokenizer pre_tokenizer(pre_tokenizer_regexes(pre));
    for (int iteration = 0; iteration < 300; ++iteration) {
      std::string text;
      for (int i = static_cast<int>(rng() % 30); i > 0; --i) {
        text += rng() % 2 ? static_cast<char>(rng() % 256) : " a1\n\xE4\xB8\xAD"[rng() % 8];
      }
      std::string joined;
      for (std::string_view piece : pre_tokenizer.split(text)) {
        ASSERT_FALSE(piece.empty()) << pre;
        joined += piece;
      }
      ASSERT_EQ(joined, text) << pre;
    }
  }
}

TEST(PreTokenizer, ErrorsAreInputErrors) {
  EXPECT_THROW(pre_tokenizer_regexes("no-such-pre"), InputError);
  EXPECT_THROW(PreTokenizer({"(unclosed"}), InputError);
}

}  // namespace
}  // namespace tandem
