// The encoder's rules on small hand-made vocabularies (no ../shared needed): score order,
// leftmost ties, only Normal/UserDefined pieces formed by merging, byte and UNK fallback,
// and the leading-space rule in decode.
#include <algorithm>

#include "io/gguf_writer.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

// Pieces after the three specials; scores as given. No byte tokens unless `with_bytes`.
Vocab make_vocab(const std::vector<std::pair<std::string, float>>& pieces, bool with_bytes) {
  Vocab vocab;
  auto add = [&](std::string piece, float score, TokenType type) {
    vocab.pieces.push_back(std::move(piece));
    vocab.scores.push_back(score);
    vocab.types.push_back(type);
  };
  add("<unk>", 0, TokenType::Unknown);
  add("<s>", 0, TokenType::Control);
  add("</s>", 0, TokenType::Control);
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) add(fmt::format("<0x{:02X}>", b), 0, TokenType::Byte);
  }
  for (const auto& [piece, score] : pieces) add(piece, score, TokenType::Normal);
  return vocab;
}

int32_t id_of(const Tokenizer& tokenizer, const std::string& piece) {
  const auto& pieces = tokenizer.vocab().pieces;
  return static_cast<int32_t>(std::find(pieces.begin(), pieces.end(), piece) - pieces.begin());
}

TEST(SyntheticVocab, HigherScoreMergesFirst) {
  // "abc": ab (score 1) beats bc (score 0), so the result is ab + c, not a + bc.
  const Tokenizer tokenizer(
      make_vocab({{"\xE2\x96\x81", -5}, {"a", -1}, {"b", -1}, {"c", -1}, {"ab", 1}, {"bc", 0}}, false));
  const std::vector<int32_t> ids = tokenizer.encode("abc", false);
  EXPECT_EQ(ids,
            (std::vector<int32_t>{id_of(tokenizer, "\xE2\x96\x81"), id_of(tokenizer, "ab"), id_of(tokenizer, "c")}));
}

TEST(SyntheticVocab, TiesGoLeftmost) {
  Vocab vocab = make_vocab({{"a", -1}, {"aa", 0}}, false);
  vocab.add_space_prefix = false;
  const Tokenizer tokenizer(std::move(vocab));
  EXPECT_EQ(tokenizer.encode("aaa", false), (std::vector<int32_t>{id_of(tokenizer, "aa"), id_of(tokenizer, "a")}));
}

TEST(SyntheticVocab, ControlPiecesAreNotMerged) {
  Vocab vocab = make_vocab({{"<", -1}, {"s", -1}, {">", -1}, {"<s", 0}}, true);
  vocab.add_space_prefix = false;
  const Tokenizer tokenizer(std::move(vocab));
  // "<s>" is the control token 1; merging may form "<s" but never "<s>".
  EXPECT_EQ(tokenizer.encode("<s>", false), (std::vector<int32_t>{id_of(tokenizer, "<s"), id_of(tokenizer, ">")}));
}

TEST(SyntheticVocab, ByteFallbackAndUnk) {
  Vocab with_bytes = make_vocab({{"x", 0}}, true);
  with_bytes.add_space_prefix = false;
  const Tokenizer bytes_tokenizer(std::move(with_bytes));
  // "é" (C3 A9) is not a piece: two byte tokens.
  EXPECT_EQ(bytes_tokenizer.encode("x\xC3\xA9", false),
            (std::vector<int32_t>{id_of(bytes_tokenizer, "x"), 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(bytes_tokenizer.decode(bytes_tokenizer.encode("x\xC3\xA9", false)), "x\xC3\xA9");

  Vocab no_bytes = make_vocab({{"x", 0}}, false);
  no_bytes.add_space_prefix = false;
  const Tokenizer unk_tokenizer(std::move(no_bytes));
  EXPECT_EQ(unk_tokenizer.encode("x\xC3\xA9x", false),
            (std::vector<int32_t>{id_of(unk_tokenizer, "x"), 0, id_of(unk_tokenizer, "x")}));
}

TEST(SyntheticVocab, DecodeDropsOnlyThePrefixSpace) {
  const Tokenizer tokenizer(make_vocab({{"\xE2\x96\x81hi", 0}, {"\xE2\x96\x81", -1}}, true));
  const int32_t hi = id_of(tokenizer, "\xE2\x96\x81hi");
  EXPECT_EQ(tokenizer.token_bytes(hi), " hi");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{hi, hi}), "hi hi");
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{1, hi, hi}), "hi hi");
  // Every BOS starts a new text, as llama2.c's run.c prints it.
  EXPECT_EQ(tokenizer.decode(std::vector<int32_t>{1, hi, 2, 1, hi}), "hihi");
  EXPECT_EQ(tokenizer.encode("", true), std::vector<int32_t>{1});
  EXPECT_TRUE(tokenizer.encode("", false).empty());
}

TEST(SyntheticVocab, BadIdsAreInputErrors) {
  const Tokenizer tokenizer(make_vocab({{"x", 0}}, false));
  EXPECT_THROW(tokenizer.token_bytes(-1), InputError);
  EXPECT_THROW(tokenizer.decode(std::vector<int32_t>{1000}), InputError);
  Vocab broken = make_vocab({{"x", 0}}, false);
  broken.scores.pop_back();
  EXPECT_THROW(Tokenizer{std::move(broken)}, InputError);
}

}  // namespace
}  // namespace tandem

namespace tandem {
namespace {

// A vocabulary-only GGUF in memory: the GGUF reader and vocab_from_gguf together.
Vocab vocab_from_test_gguf(const std::string& model, bool with_types, int32_t bos_id) {
  GgufWriter writer;
  writer.set("tokenizer.ggml.model", GgufValue::string(model));
  GgufArray tokens, scores, types;
  for (const char* piece : {"<unk>", "<s>", "</s>", "<0x41>",
                            "\xE2\x96\x81"
                            "A"}) {
    tokens.push_back(GgufValue::string(piece));
    scores.push_back(GgufValue::f32(0));
  }
  for (int type : {2, 3, 3, 6, 1}) types.push_back(GgufValue::i32(type));
  writer.set("tokenizer.ggml.tokens", GgufValue::array(GgufValueType::String, tokens));
  writer.set("tokenizer.ggml.scores", GgufValue::array(GgufValueType::Float32, scores));
  if (with_types) {
    writer.set("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::Int32, types));
  }
  writer.set("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<uint32_t>(bos_id)));
  writer.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  const std::vector<uint8_t> bytes = writer.to_bytes();  // parse() views these bytes
  return vocab_from_gguf(GgufFile::parse(bytes));
}

TEST(SyntheticGgufVocab, ReadsFieldsAndInfersMissingTypes) {
  for (bool with_types : {true, false}) {
    const Vocab vocab = vocab_from_test_gguf("llama", with_types, 1);
    EXPECT_FALSE(vocab.add_bos);
    EXPECT_TRUE(vocab.add_space_prefix);
    EXPECT_EQ(vocab.types[1], TokenType::Control);
    EXPECT_EQ(vocab.types[3], TokenType::Byte);
    const Tokenizer tokenizer(vocab);
    // add_bos is a hint for callers; encode's argument decides.
    EXPECT_EQ(tokenizer.encode("A", true), (std::vector<int32_t>{1, 4}));
    EXPECT_EQ(tokenizer.encode("A", false), (std::vector<int32_t>{4}));
    EXPECT_EQ(tokenizer.token_bytes(3), "A");
  }
}

TEST(SyntheticGgufVocab, RejectsOtherModelsAndBadIds) {
  try {
    vocab_from_test_gguf("bert", true, 1);
    ADD_FAILURE() << "bert accepted";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("bert"), std::string::npos) << error.what();
  }
  EXPECT_THROW(vocab_from_test_gguf("llama", true, 99), InputError);
}

}  // namespace
}  // namespace tandem
