// StreamingDetokenizer: its pushes plus finish() equal Tokenizer::decode for random id
// sequences (byte tokens splitting characters, stray bytes, BOS in the middle), and every
// push returns valid UTF-8.
#include <random>

#include "tokenizer/streaming_detokenizer.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

void expect_streaming_equals_decode(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  StreamingDetokenizer stream(tokenizer);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string out = stream.push(id);
    ASSERT_TRUE(testing::is_valid_utf8(out)) << "push(" << id << ") returned half a character";
    streamed += out;
  }
  const std::string rest = stream.finish();
  ASSERT_TRUE(testing::is_valid_utf8(rest));
  streamed += rest;
  ASSERT_EQ(streamed, tokenizer.decode(ids));
}

TEST(StreamingDetokenizer, EqualsDecodeOnRandomIds) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  std::mt19937 rng(2024);
  const int32_t n_vocab = static_cast<int32_t>(tokenizer.vocab().size());
  // Byte tokens are ids 3..258 in this vocab; 0xC2-0xF4 lead bytes, 0x80-0xBF continuations.
  auto byte_id = [](int value) { return 3 + value; };
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::vector<int32_t> ids;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      switch (rng() % 6) {
        case 0: ids.push_back(byte_id(0xC2 + rng() % 0x33)); break;  // a lead byte
        case 1: ids.push_back(byte_id(0x80 + rng() % 0x40)); break;  // a continuation byte
        case 2: ids.push_back(byte_id(rng() % 256)); break;
        case 3: ids.push_back(static_cast<int32_t>(rng() % 3)); break;  // unk, BOS, EOS
        default: ids.push_back(static_cast<int32_t>(rng() % n_vocab)); break;
      }
    }
    expect_streaming_equals_decode(tokenizer, ids);
  }
}

TEST(StreamingDetokenizer, HoldsSplitCharacter) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  // "🦙" has no piece of its own: it encodes as four byte tokens.
  const std::vector<int32_t> ids = tokenizer.encode("a 🦙!", true);
  StreamingDetokenizer stream(tokenizer);
  std::vector<std::string> outputs;
  for (int32_t id : ids) outputs.push_back(stream.push(id));
  outputs.push_back(stream.finish());
  std::string joined;
  for (const std::string& out : outputs) {
    EXPECT_TRUE(testing::is_valid_utf8(out));
    joined += out;
  }
  EXPECT_EQ(joined, "a 🦙!");
  EXPECT_EQ(outputs.back(), "");
}

TEST(StreamingDetokenizer, EncodedTextStreamsBack) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  for (const char* text : {"  two leading spaces", "中文 and ñ\n", "\xF0\x9F\x98\x80\xE2\x9C\x85"}) {
    expect_streaming_equals_decode(tokenizer, tokenizer.encode(text, true));
    expect_streaming_equals_decode(tokenizer, tokenizer.encode(text, false));
  }
}

TEST(StreamingDetokenizer, IncompleteTailBecomesReplacementAtFinish) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  StreamingDetokenizer stream(tokenizer);
  EXPECT_EQ(stream.push(3 + 0xE4), "");
  EXPECT_EQ(stream.push(3 + 0xB8), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// vLLM's skip_special_tokens / spaces_between_special_tokens: control tokens print nothing by
// default; without skipping they print their text, spaced from their neighbours unless asked not to.
TEST(StreamingDetokenizer, SpecialTokensPrintOnlyWhenNotSkipped) {
  TANDEM_REQUIRE_SHARED(testing::kLlamaSpmGguf);
  const Tokenizer tokenizer = testing::gguf_tokenizer(testing::kLlamaSpmGguf);
  std::vector<int32_t> ids = tokenizer.encode("Hello world", /*add_bos=*/true);
  ASSERT_EQ(ids.front(), tokenizer.vocab().bos_id);
  ids.push_back(tokenizer.vocab().eos_id);
  const auto streamed = [&](DetokenizeOptions options) {
    StreamingDetokenizer stream(tokenizer, options);
    std::string out;
    for (int32_t id : ids) out += stream.push(id);
    return out + stream.finish();
  };
  EXPECT_EQ(streamed({}), "Hello world");
  EXPECT_EQ(streamed({}), tokenizer.decode(ids));
  EXPECT_EQ(streamed({.skip_special_tokens = false, .spaces_between_special_tokens = false}), "<s>Hello world</s>");
  EXPECT_EQ(streamed({.skip_special_tokens = false, .spaces_between_special_tokens = true}), "<s> Hello world </s>");
  // Spacing alone changes nothing while control tokens are skipped.
  EXPECT_EQ(streamed({.skip_special_tokens = true, .spaces_between_special_tokens = false}), "Hello world");
}

}  // namespace
}  // namespace tandem
