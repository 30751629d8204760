// The PCRE2 pre-tokenizer: the named splits on hand-checked examples (contractions, digit
// grouping, look-ahead on spaces, DeepSeek's regex sequence, Falcon's HF sequence, GPT-4o's
// case-aware words), HF's split behaviours and fixed pre-tokenizers worked out from their
// definitions, full coverage of any bytes, and clear errors for unknown names and broken
// patterns. No ../shared needed: llama.cpp ships no vectors for these splits.
#include <random>
#include <stdexcept>

#include "base/error.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

using Pieces = std::vector<std::string>;

Pieces split_steps(const std::vector<PreSplit>& steps, const std::string& text) {
  const PreTokenizer pre_tokenizer(steps);
  Pieces out;
  for (std::string_view piece : pre_tokenizer.split(text)) out.emplace_back(piece);
  return out;
}

Pieces split(const std::string& pre, const std::string& text) { return split_steps(pre_tokenizer_regexes(pre), text); }

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

// Falcon: Punctuation (runs) first, so an apostrophe or bracket is cut off before GPT-2's
// regex could join it to a word; then digit runs, then threes.
TEST(PreTokenizer, FalconSequence) {
  EXPECT_EQ(split("falcon", "Hello, world!! 12345 x  42"),
            (Pieces{"Hello", ",", " world", "!!", " ", "123", "45", " x", " ", " ", "42"}));
  // GPT-2 alone: "don", "'t" and " (", "x", ")".
  EXPECT_EQ(split("falcon", "don't (x)"), (Pieces{"don", "'", "t", " ", "(", "x", ")"}));
  // $ + ~ are ASCII punctuation to HF; a run of them is one piece.
  EXPECT_EQ(split("falcon", "a$+~b"), (Pieces{"a", "$+~", "b"}));
  // Digit runs of 7: 123 456 7, and a space before digits is its own piece.
  EXPECT_EQ(split("falcon", " 1234567"), (Pieces{" ", "123", "456", "7"}));
  // HF runs the digit steps on ByteLevel's alphabet, where byte BC is "¼": "м" (D0 BC) is cut
  // in two, and "²" (C2 B2) too; Arabic-Indic digits have no such byte and stay whole.
  EXPECT_EQ(split("falcon", "\xD0\xBC"), (Pieces{"\xD0", "\xBC"}));
  EXPECT_EQ(split("falcon", "x\xC2\xB2y"), (Pieces{"x", "\xC2", "\xB2", "y"}));
  EXPECT_EQ(split("falcon", "\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6"), (Pieces{"\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6"}));
  // CJK: the fullwidth comma (U+FF0C, punctuation) is cut off first, then the byte steps cut
  // it (EF BC 8C) and "好" (E5 A5 BD) at their "¼" and "½" bytes; "中文" has no such byte.
  EXPECT_EQ(split("falcon", "\xE4\xB8\xAD\xE6\x96\x87\xEF\xBC\x8C\xE5\xA5\xBD"),
            (Pieces{"\xE4\xB8\xAD\xE6\x96\x87", "\xEF", "\xBC", "\x8C", "\xE5\xA5", "\xBD"}));
}

// GPT-4o: words split at lower-to-upper changes, contractions kept on their word, numbers
// in threes, a space before digits alone.
TEST(PreTokenizer, Gpt4oSplitsCaseAwareWords) {
  EXPECT_EQ(split("gpt-4o", "Hello WORLD don't DON'T iPhone 12345"),
            (Pieces{"Hello", " WORLD", " don't", " DON'T", " i", "Phone", " ", "123", "45"}));
  EXPECT_EQ(split("llama4", "camelCase"), (Pieces{"camel", "Case"}));
  // Cyrillic upper then lower is one word; CJK (Lo, in both classes) one piece.
  EXPECT_EQ(split("gpt-4o", "\xD0\x9F\xD0\xA0\xD0\x98\xD0\xBC\xD0\xB8\xD1\x80 \xE4\xB8\xAD\xE6\x96\x87"),
            (Pieces{"\xD0\x9F\xD0\xA0\xD0\x98\xD0\xBC\xD0\xB8\xD1\x80", " \xE4\xB8\xAD\xE6\x96\x87"}));
  // Punctuation takes the newlines (and slashes) after it; a lone quote is punctuation.
  EXPECT_EQ(split("gpt-4o", "x.\n\ny 'tis/\n"), (Pieces{"x", ".\n\n", "y", " '", "tis", "/\n"}));
  // The contraction is case-insensitive but only ASCII, as llama.cpp spells it: "'ſ" (long s)
  // is not "'s" here, though tiktoken's Unicode case folding would take it.
  EXPECT_EQ(split("gpt-4o", "it's it'S it'\xC5\xBF"), (Pieces{"it's", " it'S", " it", "'\xC5\xBF"}));
  EXPECT_EQ(split("gpt-4o", "a  \n b"), (Pieces{"a", "  \n", " b"}));
}

// ChatGLM/GLM-4 write cl100k's split, which is Llama 3's.
TEST(PreTokenizer, ChatGlmIsLlama3) {
  EXPECT_EQ(split("chatglm-bpe", "don't 12345"), (Pieces{"don", "'t", " ", "123", "45"}));
  for (const char* text : {"Hello WORLD don't", "x 2024\n\n  y", "\xE4\xB8\xAD\xE6\x96\x87 (hi)!"}) {
    EXPECT_EQ(split("chatglm-bpe", text), split("llama-bpe", text)) << text;
    EXPECT_EQ(split("glm4", text), split("llama-bpe", text)) << text;
  }
}

// HF's SplitDelimiterBehavior on one punctuation character per match.
TEST(PreTokenizer, SplitBehaviours) {
  const std::string text = "Hi!!, (x)";
  auto punctuation = [&](SplitBehavior behavior) { return split_steps({hf_punctuation(behavior, false)}, text); };
  EXPECT_EQ(punctuation(SplitBehavior::Isolated), (Pieces{"Hi", "!", "!", ",", " ", "(", "x", ")"}));
  EXPECT_EQ(punctuation(SplitBehavior::Contiguous), (Pieces{"Hi", "!!,", " ", "(", "x", ")"}));
  EXPECT_EQ(punctuation(SplitBehavior::Removed), (Pieces{"Hi", " ", "x"}));
  // A match joins its neighbour only when that is not a match itself.
  EXPECT_EQ(punctuation(SplitBehavior::MergedWithPrevious), (Pieces{"Hi!", "!", ",", " (", "x)"}));
  EXPECT_EQ(punctuation(SplitBehavior::MergedWithNext), (Pieces{"Hi", "!", "!", ", ", "(x", ")"}));
  // Invert: the text between matches is what the behaviour acts on.
  EXPECT_EQ(split_steps({PreSplit("a", SplitBehavior::Isolated, /*invert=*/true)}, "xaay"),
            (Pieces{"x", "a", "a", "y"}));
  EXPECT_EQ(split_steps({PreSplit("a", SplitBehavior::Contiguous, /*invert=*/true)}, "xaay"), (Pieces{"x", "aa", "y"}));
  EXPECT_EQ(split_steps({PreSplit("a", SplitBehavior::Removed, /*invert=*/true)}, "xaayzaw"), (Pieces{"a", "a", "a"}));
  // Unicode punctuation and Rust's ASCII punctuation count; currency outside ASCII does not.
  EXPECT_EQ(split_steps({hf_punctuation(SplitBehavior::Isolated, false)}, "a\xC2\xABz\xC2\xBB 5\xE2\x82\xAC"),
            (Pieces{"a", "\xC2\xAB", "z", "\xC2\xBB", " 5\xE2\x82\xAC"}));
}

// Long text is split as it is matched, its pieces settled every kCheckpointPieces segments at
// a boundary no behaviour joins across (pre_tokenizer.h: the memory stays bounded). The
// pieces must be those of joining all the segments at once, as HF defines the behaviours:
// checked against that definition, written out here, on random text with tens of thousands
// of segments, for every behaviour, with and without invert.
TEST(PreTokenizer, LongTextGivesThePiecesOfOneWholeJoin) {
  std::mt19937 rng(5);
  const std::vector<std::string> parts = {"Hi", "!", ",", " ", "(", "x", ")", "!!", "ab"};
  std::string text;
  while (text.size() < 200000) text += parts[rng() % parts.size()];
  const auto is_match = [](char c) { return c == '!' || c == ',' || c == '(' || c == ')'; };
  for (const bool invert : {false, true}) {
    // The segments of the regex [!,()] (one character a match): matches, and the runs between.
    std::vector<std::pair<std::string, bool>> segments;  // text, acted on by the behaviour
    for (size_t i = 0; i < text.size();) {
      size_t j = i + 1;
      if (!is_match(text[i]))
        while (j < text.size() && !is_match(text[j])) ++j;
      segments.emplace_back(text.substr(i, j - i), is_match(text[i]) != invert);
      i = j;
    }
    for (const SplitBehavior behavior : {SplitBehavior::Isolated, SplitBehavior::Removed, SplitBehavior::Contiguous,
                                         SplitBehavior::MergedWithPrevious, SplitBehavior::MergedWithNext}) {
      Pieces expected;
      bool previous_delimiter = true, joined_previous = false;
      for (size_t k = 0; k < segments.size(); ++k) {
        const auto& [piece, delimiter] = segments[k];
        switch (behavior) {
          case SplitBehavior::Isolated: expected.push_back(piece); break;
          case SplitBehavior::Removed:
            if (!delimiter) expected.push_back(piece);
            break;
          case SplitBehavior::Contiguous:
            if (k > 0 && delimiter == previous_delimiter) {
              expected.back() += piece;
            } else {
              expected.push_back(piece);
            }
            break;
          case SplitBehavior::MergedWithPrevious:
            if (delimiter && k > 0 && !previous_delimiter) {
              expected.back() += piece;
            } else {
              expected.push_back(piece);
            }
            break;
          case SplitBehavior::MergedWithNext:
            if (joined_previous) {
              expected.back() += piece;
              joined_previous = false;
            } else {
              expected.push_back(piece);
              joined_previous = delimiter && k + 1 < segments.size() && !segments[k + 1].second;
            }
            break;
        }
        previous_delimiter = delimiter;
      }
      const Pieces got = split_steps({PreSplit("[!,()]", behavior, invert)}, text);
      EXPECT_EQ(got.size(), expected.size()) << "behaviour " << static_cast<int>(behavior) << ", invert " << invert;
      EXPECT_TRUE(got == expected) << "behaviour " << static_cast<int>(behavior) << ", invert " << invert;
    }
  }
}

// A checkpoint is called as a long split goes (every kCheckpointPieces pieces or matches):
// throwing from it leaves the split there, before the text is all matched.
TEST(PreTokenizer, ACheckpointThatThrowsStopsALongSplit) {
  const PreTokenizer pre_tokenizer(pre_tokenizer_regexes("gpt-2"));
  std::string text;
  while (text.size() < (1u << 20)) text += "a.";
  size_t calls = 0, pieces = 0;
  EXPECT_THROW(pre_tokenizer.for_each_piece(
                   text, [&](std::string_view) { ++pieces; },
                   [&] {
                     if (++calls == 3) throw std::runtime_error("stop");
                   }),
               std::runtime_error);
  EXPECT_EQ(calls, 3u);
  EXPECT_LT(pieces, 4 * PreTokenizer::kCheckpointPieces) << "the split went on past the checkpoint";
  // Without a throw it covers the text: a checkpoint every kCheckpointPieces pieces or matches.
  calls = 0;
  pieces = 0;
  pre_tokenizer.for_each_piece(
      text, [&](std::string_view) { ++pieces; }, [&] { ++calls; });
  EXPECT_EQ(pieces, text.size());
  EXPECT_GE(calls, text.size() / PreTokenizer::kCheckpointPieces);
}

TEST(PreTokenizer, HfDigits) {
  // ³ (U+00B3) is a number (No) to HF's char::is_numeric, as to \p{N}.
  EXPECT_EQ(split_steps({hf_digits(true, false)}, "ab12 \xC2\xB3"
                                                  "4"),
            (Pieces{"ab", "1", "2", " ", "\xC2\xB3", "4"}));
  EXPECT_EQ(split_steps({hf_digits(false, false)}, "ab12 \xC2\xB3"
                                                   "4 56789"),
            (Pieces{"ab", "12", " ",
                    "\xC2\xB3"
                    "4",
                    " ", "56789"}));
  // After ByteLevel only ASCII digits and the bytes that stand for ² ³ ¹ ¼ ½ ¾ are digits.
  EXPECT_EQ(split_steps({hf_digits(false, true)}, "7\xD9\xA3\xC2\xBD"), (Pieces{"7", "\xD9\xA3\xC2", "\xBD"}));
}

TEST(PreTokenizer, HfWhitespace) {
  // Words (letters, marks, numbers, "_") and runs of other non-space characters; spaces go.
  EXPECT_EQ(split_steps({hf_whitespace()}, "Hello, w\xC3\xB6rld!  \xC3\xA7"
                                           "a_va 3.5\t\nok "),
            (Pieces{"Hello", ",", "w\xC3\xB6rld", "!",
                    "\xC3\xA7"
                    "a_va",
                    "3", ".", "5", "ok"}));
  // A combining accent (U+0301) stays on its word; PCRE2's own \w would cut it off.
  EXPECT_EQ(split_steps({hf_whitespace()}, "cafe\xCC\x81!"), (Pieces{"cafe\xCC\x81", "!"}));
  EXPECT_EQ(split_steps({hf_whitespace()}, " \t\n"), Pieces{});
  EXPECT_EQ(split_steps({hf_whitespace_split()}, "  a,b  c\td\n\xE3\x80\x80"
                                                 "e"),
            (Pieces{"a,b", "c", "d", "e"}));  // U+3000, the ideographic space, is white space
}

TEST(PreTokenizer, HfMetaspaceSplit) {
  const std::string m = "\xE2\x96\x81";
  EXPECT_EQ(split_steps({hf_metaspace_split()}, m + "Hello" + m + m + "world" + m),
            (Pieces{m + "Hello", m, m + "world", m}));
  EXPECT_EQ(split_steps({hf_metaspace_split()}, "ab" + m + "c"), (Pieces{"ab", m + "c"}));
}

// A byte-level vocabulary-only GGUF: ids 0..255 are the bytes, then the pieces `merges` make.
Vocab gpt2_gguf_vocab(const std::string& pre, const std::vector<std::pair<std::string, std::string>>& merges) {
  GgufWriter writer;
  writer.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  writer.set("tokenizer.ggml.pre", GgufValue::string(pre));
  GgufArray tokens, merge_list;
  for (int b = 0; b < 256; ++b) tokens.push_back(GgufValue::string(byte_to_piece_char(static_cast<uint8_t>(b))));
  for (const auto& [left, right] : merges) {
    tokens.push_back(GgufValue::string(left + right));
    merge_list.push_back(GgufValue::string(left + " " + right));
  }
  writer.set("tokenizer.ggml.tokens", GgufValue::array(GgufValueType::String, tokens));
  writer.set("tokenizer.ggml.merges", GgufValue::array(GgufValueType::String, merge_list));
  const std::vector<uint8_t> bytes = writer.to_bytes();  // parse() views these bytes
  return vocab_from_gguf(GgufFile::parse(bytes));
}

// The new names reach the encoder from a GGUF: the same merges give different tokens.
TEST(PreTokenizer, GgufNamesDecideTheTokens) {
  const std::string space = "\xC4\xA0";  // "Ġ"
  const std::vector<std::pair<std::string, std::string>> merges = {
      {space, "("}, {"d", "o"}, {"do", "n"}, {"don", "'"}, {"don'", "t"}, {"1", "2"}, {"12", "3"}, {"123", "4"}};
  const int32_t space_paren = 256, don = 258, dont = 260, d123 = 262, d1234 = 263;
  using Ids = std::vector<int32_t>;
  auto encode = [&](const std::string& pre, const std::string& text) {
    return Tokenizer(gpt2_gguf_vocab(pre, merges)).encode(text, false);
  };
  EXPECT_EQ(encode("gpt-2", " (x)"), (Ids{space_paren, 'x', ')'}));
  EXPECT_EQ(encode("falcon", " (x)"), (Ids{' ', '(', 'x', ')'}));  // Punctuation first
  EXPECT_EQ(encode("gpt-4o", " (x)"), (Ids{space_paren, 'x', ')'}));
  EXPECT_EQ(encode("chatglm-bpe", " (x)"), (Ids{space_paren, 'x', ')'}));
  EXPECT_EQ(encode("gpt-2", "don't"), (Ids{don, '\'', 't'}));
  EXPECT_EQ(encode("falcon", "don't"), (Ids{don, '\'', 't'}));
  EXPECT_EQ(encode("gpt-4o", "don't"), (Ids{dont}));  // the contraction stays on its word
  EXPECT_EQ(encode("chatglm-bpe", "don't"), (Ids{don, '\'', 't'}));
  EXPECT_EQ(encode("gpt-2", "1234"), (Ids{d1234}));
  EXPECT_EQ(encode("falcon", "1234"), (Ids{d123, '4'}));
  EXPECT_EQ(encode("gpt-4o", "1234"), (Ids{d123, '4'}));
  EXPECT_EQ(encode("glm4", "1234"), (Ids{d123, '4'}));
  // An unknown name is one line naming it (and the file).
  try {
    gpt2_gguf_vocab("no-such-pre", merges);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'no-such-pre'"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(PreTokenizer, PiecesCoverAnyBytes) {
  std::mt19937 rng(3);
  for (const char* pre : {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3", "starcoder",
                          "tekken", "falcon", "gpt-4o", "chatglm-bpe"}) {
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
  try {
    pre_tokenizer_regexes("no-such-pre");
    ADD_FAILURE() << "accepted";
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'no-such-pre'"), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_THROW(PreTokenizer({"(unclosed"}), InputError);
}

}  // namespace
}  // namespace tandem
