// The token sequences the engine matches for DRY's sequence breakers and vLLM's bad_words,
// derived from a real vocabulary (GPT-2's, byte-level: no space prefix in the way): every token
// containing a breaker breaks alone, tokens ending with part of one head a sequence; a bad word
// counts as encoded alone and after a space; bans follow the generated tail.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/bad_words.h"
#include "engine/dry_penalty.h"
#include "tokenizer/tokenizer_test_util.h"

namespace tandem {
namespace {

bool has(const std::vector<std::vector<int32_t>>& sequences, const std::vector<int32_t>& sequence) {
  return std::find(sequences.begin(), sequences.end(), sequence) != sequences.end();
}

TEST(TokenSequences, DryBreakersAreEveryTokenHoldingOneAndEveryPartialHead) {
  TANDEM_REQUIRE_SHARED(testing::kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kGpt2Gguf);
  const std::vector<std::string> breakers = {"\n", "::"};
  const auto sequences = dry_breaker_sequences(tokenizer, breakers);
  EXPECT_TRUE(std::is_sorted(sequences.begin(), sequences.end()));
  EXPECT_EQ(std::adjacent_find(sequences.begin(), sequences.end()), sequences.end());
  size_t singles = 0, expected_singles = 0;
  for (const auto& s : sequences) singles += s.size() == 1;
  const std::vector<int32_t> colon = tokenizer.encode(":", false);
  ASSERT_EQ(colon.size(), 1u);
  for (int32_t id = 0; id < tokenizer.vocab().size(); ++id) {
    const std::string text = tokenizer.token_bytes(id);
    const bool holds = text.find('\n') != std::string::npos || text.find("::") != std::string::npos;
    expected_singles += holds;
    if (holds) {
      EXPECT_TRUE(has(sequences, {id})) << id;
    }
    // A token ending with ":" (and holding no breaker) heads ":" + the rest, encoded.
    if (!holds && !text.empty() && text.back() == ':') {
      EXPECT_TRUE(has(sequences, {id, colon[0]})) << id;
    }
  }
  EXPECT_EQ(singles, expected_singles);
  EXPECT_THROW(dry_breaker_sequences(tokenizer, std::vector<std::string>{""}), InputError);
  EXPECT_THROW(dry_breaker_sequences(tokenizer, std::vector<std::string>{std::string(41, 'x')}), InputError);
}

TEST(TokenSequences, BadWordsAsEncodedAloneAndAfterASpace) {
  TANDEM_REQUIRE_SHARED(testing::kGpt2Gguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kGpt2Gguf);
  const std::vector<int32_t> plain = tokenizer.encode("hello", false);
  const std::vector<int32_t> spaced = tokenizer.encode(" hello", false);
  ASSERT_EQ(plain.size(), spaced.size());
  ASSERT_NE(plain[0], spaced[0]);
  const auto words = bad_word_sequences(tokenizer, std::vector<std::string>{"  hello"});  // leading spaces dropped
  EXPECT_EQ(words, (std::vector<std::vector<int32_t>>{plain, spaced}));
  EXPECT_THROW(bad_word_sequences(tokenizer, std::vector<std::string>{"   "}), InputError);
}

TEST(TokenSequences, BansFollowTheGeneratedTail) {
  const std::vector<std::vector<int32_t>> words = {{7}, {1, 2, 3}, {4, 5}};
  std::vector<int32_t> banned;
  append_bad_word_bans(words, std::vector<int32_t>{}, banned);
  EXPECT_EQ(banned, (std::vector<int32_t>{7}));  // one token: always
  banned.clear();
  append_bad_word_bans(words, std::vector<int32_t>{9, 1, 2}, banned);
  EXPECT_EQ(banned, (std::vector<int32_t>{7, 3}));
  banned.clear();
  append_bad_word_bans(words, std::vector<int32_t>{1, 2, 4}, banned);
  EXPECT_EQ(banned, (std::vector<int32_t>{7, 5}));
}

}  // namespace
}  // namespace tandem
