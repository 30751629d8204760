// The UTF-8 sanitizer: valid text passes unchanged, ill-formed bytes become one U+FFFD per
// maximal subpart, and any chunking of the input gives the same output.
#include <random>

#include "tokenizer_test_util.h"

namespace tandem {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, ValidTextUnchanged) {
  const std::string text = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\n";  // a é 中 😀
  EXPECT_EQ(sanitize_utf8(text), text);
}

TEST(Utf8, IllFormedBecomeReplacement) {
  EXPECT_EQ(sanitize_utf8("\x80"), kFffd);
  EXPECT_EQ(sanitize_utf8("\xC0\xAF"), kFffd + kFffd);  // overlong lead
  EXPECT_EQ(sanitize_utf8("\xE4\xB8"), kFffd);          // truncated at the end
  EXPECT_EQ(sanitize_utf8("\xE4\xB8"
                          "a"),
            kFffd + "a");                                                       // truncated in the middle
  EXPECT_EQ(sanitize_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // surrogate
  EXPECT_EQ(sanitize_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > U+10FFFF
  EXPECT_EQ(sanitize_utf8("\xFF"
                          "b"),
            kFffd + "b");
}

TEST(Utf8, SequenceLength) {
  EXPECT_EQ(utf8_sequence_length("a", 0), 1u);
  EXPECT_EQ(utf8_sequence_length("\xE4\xB8\xAD", 0), 3u);
  EXPECT_EQ(utf8_sequence_length("\xE4\xB8", 0), 1u);
  EXPECT_EQ(utf8_sequence_length("\xE4"
                                 "ab",
                                 0),
            1u);
  EXPECT_EQ(utf8_sequence_length("x\xF0\x9F\x98\x80", 1), 4u);
}

TEST(Utf8, ChunkingDoesNotMatter) {
  std::mt19937 rng(7);
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() % 3 == 0 ? rng() % 256 : 0x80 + rng() % 0x40);
    const std::string whole = sanitize_utf8(bytes);
    ASSERT_TRUE(testing::is_valid_utf8(whole));
    Utf8Sanitizer sanitizer;
    std::string pieces;
    for (size_t i = 0; i < bytes.size();) {
      const size_t n = std::min<size_t>(bytes.size() - i, rng() % 4);
      std::string out;
      sanitizer.feed(std::string_view(bytes).substr(i, n), out);
      ASSERT_TRUE(testing::is_valid_utf8(out));
      pieces += out;
      i += n;
    }
    sanitizer.finish(pieces);
    ASSERT_EQ(pieces, whole);
  }
}

// utf8_character_start is the last character start at or before a byte, characters being
// what utf8_sequence_length splits the text into from its start (valid, ill-formed, mixed).
TEST(Utf8, CharacterStartIsTheLastBoundaryBeforeAByte) {
  std::mt19937 rng(11);
  const std::vector<std::string> parts = {"a",        "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\xA6\x99", "\x80", "\xBF",
                                          "\xE4\xB8", "\xF0\x9F", "\xC0\x80",     "\xED\xA0\x80",     "\xFF"};
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::string text;
    while (text.size() < 20) text += parts[rng() % parts.size()];
    for (size_t pos = 0; pos < text.size(); pos += utf8_sequence_length(text, pos))
      for (size_t i = pos; i < pos + utf8_sequence_length(text, pos); ++i)
        ASSERT_EQ(utf8_character_start(text, i), pos) << "byte " << i << " of iteration " << iteration;
  }
}

}  // namespace
}  // namespace tandem
