// tokenizer.json written by the tests themselves: a small byte-level BPE (Split regex, added
// tokens, both merge spellings) encoded as worked out by hand; a SentencePiece-style export
// giving the same ids as the equivalent GGUF vocab; HF's Digits, Punctuation, Whitespace and
// Metaspace pre-tokenizers (Falcon's and StarCoder's sequences equal to their GGUF names);
// model folders; clear errors.
#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

using nlohmann::json;

// Ids 0..255: the byte-level character of byte i. Then merged pieces and added tokens.
json byte_level_tokenizer_json(bool merges_as_pairs) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_to_piece_char(static_cast<uint8_t>(b))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {{"h", "e"},         {"l", "l"},        {"he", "ll"},
                                                                   {"hell", "o"},      {"\xC4\xA0", "w"}, {"o", "r"},
                                                                   {"\xC4\xA0w", "or"}};  // "Ġ" is the space byte
  json merge_list = json::array();
  int next_id = 256;
  for (const auto& [left, right] : merges) {
    vocab[left + right] = next_id++;
    if (merges_as_pairs) {
      merge_list.push_back(json::array({left, right}));
    } else {
      merge_list.push_back(left + " " + right);
    }
  }
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", R"( ?\p{L}+|\p{N}|\s+)"}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  return {
      {"version", "1.0"},
      {"added_tokens", json::array({{{"id", 263}, {"content", "<|end|>"}, {"special", true}},
                                    {{"id", 264}, {"content", "<tool>"}, {"special", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}},
  };
}

TEST(HfTokenizerJson, ByteLevelBpeEncodesAsWorkedOutByHand) {
  for (bool pairs : {false, true}) {
    const Vocab vocab = vocab_from_tokenizer_json_text(byte_level_tokenizer_json(pairs).dump(), "", "test");
    EXPECT_EQ(vocab.kind, VocabKind::ByteLevelBpe);
    EXPECT_EQ(vocab.size(), 265);
    EXPECT_EQ(vocab.types[263], TokenType::Control);
    EXPECT_EQ(vocab.types[264], TokenType::UserDefined);
    const Tokenizer tokenizer(vocab);
    const std::string text = "hello world 42<|end|><tool>";
    // hello: he(0) ll(1) hell(2) hello(3). " world": Ġw(4) or(5) Ġwor(6), then l, d. The
    // Split leaves "<|end|>" as an unmatched gap: plain bytes, no merges apply.
    const std::vector<int32_t> plain = {259, 262, 'l', 'd', ' ', '4', '2', '<', '|', 'e', 'n', 'd', '|', '>', 264};
    EXPECT_EQ(tokenizer.encode(text, false), plain) << "pairs " << pairs;
    EXPECT_EQ(tokenizer.decode(plain), text);
    EXPECT_EQ(tokenizer.encode(text, false, /*parse_special=*/true),
              (std::vector<int32_t>{259, 262, 'l', 'd', ' ', '4', '2', 263, 264}));
    EXPECT_EQ(vocab.bos_id, -1);  // no BOS anywhere: none is added
    EXPECT_EQ(tokenizer.encode("he", true), std::vector<int32_t>{256});
  }
}

std::vector<std::string> pieces_of(const std::vector<PreSplit>& steps, const std::string& text) {
  const PreTokenizer pre_tokenizer(steps);
  std::vector<std::string> out;
  for (std::string_view piece : pre_tokenizer.split(text)) out.emplace_back(piece);
  return out;
}

// tokenizer.json's pre_tokenizer blocks of Falcon and StarCoder give the splits of their
// tokenizer.ggml.pre names: the steps after ByteLevel included.
TEST(HfTokenizerJson, FalconAndStarCoderSequencesMatchTheirGgufNames) {
  json falcon = byte_level_tokenizer_json(false);
  falcon["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Punctuation"}, {"behavior", "Contiguous"}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}},
                    {{"type", "Digits"}, {"individual_digits", false}},
                    {{"type", "Split"},
                     {"pattern", {{"Regex", "[0-9][0-9][0-9]"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}}})}};
  json starcoder = byte_level_tokenizer_json(false);
  starcoder["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Digits"}, {"individual_digits", true}},
                                     {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}})}};
  const Vocab falcon_vocab = vocab_from_tokenizer_json_text(falcon.dump(), "", "falcon");
  const Vocab starcoder_vocab = vocab_from_tokenizer_json_text(starcoder.dump(), "", "starcoder");
  for (const char* text : {"Hello, world!! 12345 x  42", "don't (x) a$+~b", "\xD0\xBC \xC2\xB2 \xD9\xA3\xD9\xA4",
                           "\xE4\xB8\xAD\xE6\x96\x87\xEF\xBC\x8C\xE5\xA5\xBD", " 1234567\n\n"}) {
    EXPECT_EQ(pieces_of(falcon_vocab.pre_regexes, text), pieces_of(pre_tokenizer_regexes("falcon"), text)) << text;
    EXPECT_EQ(pieces_of(starcoder_vocab.pre_regexes, text), pieces_of(pre_tokenizer_regexes("starcoder"), text))
        << text;
  }
  EXPECT_EQ(pieces_of(falcon_vocab.pre_regexes, "a 1234"), (std::vector<std::string>{"a", " ", "123", "4"}));
  EXPECT_EQ(pieces_of(starcoder_vocab.pre_regexes, "a 12"), (std::vector<std::string>{"a", " ", "1", "2"}));
}

// Whitespace before ByteLevel: spaces are dropped, so "hello  world" is two words of merges.
TEST(HfTokenizerJson, WhitespaceAndPunctuationBeforeByteLevel) {
  json tokenizer = byte_level_tokenizer_json(false);
  tokenizer["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Whitespace"}},
                                     {{"type", "Punctuation"}, {"behavior", "MergedWithPrevious"}},
                                     {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  const Tokenizer from_json(vocab_from_tokenizer_json_text(tokenizer.dump(), "", "test"));
  // hello(259); "world": no space, so no "Ġw": w, or(261), l, d. "!?" one piece of Whitespace,
  // then Punctuation splits it as "!" then "?" (the "!" has no piece before it to join).
  EXPECT_EQ(from_json.encode("hello  world!?", false), (std::vector<int32_t>{259, 'w', 261, 'l', 'd', '!', '?'}));
  json split = byte_level_tokenizer_json(false);
  split["pre_tokenizer"]["pretokenizers"][0] = {{"type", "WhitespaceSplit"}};
  EXPECT_EQ(Tokenizer(vocab_from_tokenizer_json_text(split.dump(), "", "test")).encode(" hello\tworld", false),
            (std::vector<int32_t>{259, 'w', 261, 'l', 'd'}));
}

// One small SentencePiece vocabulary, as pieces with merge ranks.
struct SmallSpm {
  std::vector<std::string> pieces;
  std::vector<std::pair<std::string, std::string>> merges;  // rank order
};

SmallSpm small_spm() {
  const std::string m = "\xE2\x96\x81";  // "▁"
  SmallSpm spm;
  spm.pieces = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) spm.pieces.push_back(fmt::format("<0x{:02X}>", b));
  for (const std::string& c : {m, std::string("h"), std::string("e"), std::string("l"), std::string("o"),
                               std::string("w"), std::string("r"), std::string("d")}) {
    spm.pieces.push_back(c);
  }
  spm.merges = {{m, "h"},   {"l", "l"}, {m + "h", "e"},  {"ll", "o"}, {m + "he", "llo"},
                {"o", "r"}, {m, "w"},   {m + "w", "or"}, {"l", "d"},  {m + "wor", "ld"}};
  for (const auto& [left, right] : spm.merges) spm.pieces.push_back(left + right);
  return spm;
}

Vocab small_spm_gguf_vocab(const SmallSpm& spm) {
  GgufWriter writer;
  writer.set("tokenizer.ggml.model", GgufValue::string("llama"));
  GgufArray tokens, scores, types;
  const size_t first_merged = spm.pieces.size() - spm.merges.size();
  for (size_t i = 0; i < spm.pieces.size(); ++i) {
    tokens.push_back(GgufValue::string(spm.pieces[i]));
    // A merged piece scores minus its merge's rank; single characters never need a score.
    scores.push_back(GgufValue::f32(i >= first_merged ? -static_cast<float>(i - first_merged) : -1000.0f));
    types.push_back(GgufValue::i32(i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1));
  }
  writer.set("tokenizer.ggml.tokens", GgufValue::array(GgufValueType::String, tokens));
  writer.set("tokenizer.ggml.scores", GgufValue::array(GgufValueType::Float32, scores));
  writer.set("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::Int32, types));
  const std::vector<uint8_t> bytes = writer.to_bytes();
  return vocab_from_gguf(GgufFile::parse(bytes));
}

// The shape of TinyLlama's / Mistral's tokenizer.json.
json small_spm_tokenizer_json(const SmallSpm& spm) {
  json vocab = json::object();
  for (size_t i = 0; i < spm.pieces.size(); ++i) vocab[spm.pieces[i]] = i;
  json merges = json::array();
  for (const auto& [left, right] : spm.merges) merges.push_back(left + " " + right);
  auto special = [](int id, const char* content) { return json{{"id", id}, {"content", content}, {"special", true}}; };
  const std::string m = "\xE2\x96\x81";
  return {
      {"added_tokens", json::array({special(0, "<unk>"), special(1, "<s>"), special(2, "</s>")})},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", m}},
                                     {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", m}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", m}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}}})}}},
      {"model",
       {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true}, {"vocab", vocab}, {"merges", merges}}},
  };
}

TEST(HfTokenizerJson, SentencePieceFormMatchesGgufVocab) {
  const SmallSpm spm = small_spm();
  const Tokenizer from_gguf(small_spm_gguf_vocab(spm));
  const Vocab json_vocab = vocab_from_tokenizer_json_text(small_spm_tokenizer_json(spm).dump(), "", "test");
  EXPECT_EQ(json_vocab.kind, VocabKind::Spm);
  EXPECT_TRUE(json_vocab.add_space_prefix);
  EXPECT_TRUE(json_vocab.add_bos);
  EXPECT_EQ(json_vocab.bos_id, 1);
  EXPECT_EQ(json_vocab.eos_id, 2);
  EXPECT_EQ(json_vocab.unk_id, 0);
  const Tokenizer from_json(json_vocab);
  for (const char* text : {"hello world", "hello", " world hello", "hellow", "h\xC3\xA9llo", "world\n", "",
                           "  hello  world ", "<s>hello"}) {
    for (bool add_bos : {false, true}) {
      const std::vector<int32_t> ids = from_gguf.encode(text, add_bos);
      EXPECT_EQ(from_json.encode(text, add_bos), ids) << "text: '" << text << "'";
      EXPECT_EQ(from_json.decode(ids), text);
    }
  }
  EXPECT_EQ(
      from_json.encode("hello world", false),
      (std::vector<int32_t>{static_cast<int32_t>(spm.pieces.size() - 6), static_cast<int32_t>(spm.pieces.size() - 1)}));
  // Control text is matched only when asked for, and the space prefix restarts after it.
  EXPECT_EQ(from_json.encode("<s>hello", false, true), from_gguf.encode("<s>hello", false, true));
  EXPECT_EQ(from_json.encode("<s>hello", false, true)[0], 1);
}

// Metaspace in place of the Prepend/Replace normalizers (the newer Llama/Mistral exports).
TEST(HfTokenizerJson, MetaspaceMatchesGgufVocab) {
  const std::string m = "\xE2\x96\x81";
  SmallSpm spm = small_spm();
  // A merge across a word boundary: only Metaspace's split keeps it from applying.
  spm.merges.push_back({"o", m});
  spm.pieces.push_back("o" + m);
  const Tokenizer from_gguf(small_spm_gguf_vocab(spm));
  json tokenizer = small_spm_tokenizer_json(spm);
  tokenizer["normalizer"] = nullptr;
  for (const char* scheme : {"first", "always"}) {
    tokenizer["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", scheme}, {"split", false}};
    const Vocab vocab = vocab_from_tokenizer_json_text(tokenizer.dump(), "", "test");
    EXPECT_TRUE(vocab.add_space_prefix);
    EXPECT_TRUE(vocab.pre_regexes.empty());
    const Tokenizer from_json(vocab);
    for (const char* text : {"hello world", "o  x", "  hello  world ", "h\xC3\xA9llo\n"}) {
      EXPECT_EQ(from_json.encode(text, true), from_gguf.encode(text, true)) << scheme << " '" << text << "'";
    }
  }
  const int32_t o = static_cast<int32_t>(std::find(spm.pieces.begin(), spm.pieces.end(), "o") - spm.pieces.begin());
  const int32_t space = o - 4;  // "▁" comes four pieces before "o" (▁ h e l o)
  const int32_t o_space = static_cast<int32_t>(spm.pieces.size() - 1);
  const int32_t x = 3 + 'x';  // <0x78>
  // Without the split: ▁ o▁ ▁ x. With it: "▁o" "▁" "▁x", no "o▁".
  EXPECT_EQ(from_gguf.encode("o  x", false), (std::vector<int32_t>{space, o_space, space, x}));
  tokenizer["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", m}, {"add_prefix_space", true}};  // split: true
  const Tokenizer split(vocab_from_tokenizer_json_text(tokenizer.dump(), "", "test"));
  EXPECT_EQ(split.encode("o  x", false), (std::vector<int32_t>{space, o, space, space, x}));
  EXPECT_EQ(split.encode("hello world", false), from_gguf.encode("hello world", false));
  // prepend_scheme never: no "▁" before the first word.
  tokenizer["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", m}, {"prepend_scheme", "never"}};
  EXPECT_FALSE(vocab_from_tokenizer_json_text(tokenizer.dump(), "", "test").add_space_prefix);
  // Digits and Punctuation after Metaspace split the "▁" text.
  tokenizer["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers", json::array({{{"type", "Metaspace"}, {"prepend_scheme", "first"}, {"split", false}},
                                     {{"type", "Digits"}, {"individual_digits", true}},
                                     {{"type", "Punctuation"}}})}};
  const Vocab digits = vocab_from_tokenizer_json_text(tokenizer.dump(), "", "test");
  EXPECT_EQ(pieces_of(digits.pre_regexes, m + "a12," + m + "b"),
            (std::vector<std::string>{m + "a", "1", "2", ",", m + "b"}));
  // Gemma's form: spaces replaced by a normalizer, then a Split on " " that never matches.
  tokenizer["normalizer"] = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", m}};
  tokenizer["pre_tokenizer"] = {
      {"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}, {"invert", false}};
  const Vocab gemma = vocab_from_tokenizer_json_text(tokenizer.dump(), "", "test");
  EXPECT_FALSE(gemma.add_space_prefix);
  auto id = [&](const std::string& piece) {
    return static_cast<int32_t>(std::find(spm.pieces.begin(), spm.pieces.end(), piece) - spm.pieces.begin());
  };
  // No space prefix: h e llo ▁world (there is no "he" merge without the "▁").
  EXPECT_EQ(Tokenizer(gemma).encode("hello world", false),
            (std::vector<int32_t>{id("h"), id("e"), id("llo"), id(m + "world")}));
}

std::string temp_dir(const std::string& name) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("tandem_{}_{}", name, ::getpid());
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

TEST(HfTokenizerJson, ModelFolderAndConfig) {
  const std::string dir = temp_dir("hf_folder");
  write_text(dir + "/tokenizer.json", small_spm_tokenizer_json(small_spm()).dump());
  write_text(dir + "/tokenizer_config.json",
             R"({"add_bos_token": false, "bos_token": {"content": "<s>"}, "eos_token": "</s>"})");
  const Tokenizer tokenizer = load_tokenizer(dir, "", 0);
  EXPECT_EQ(tokenizer.vocab().kind, VocabKind::Spm);
  EXPECT_FALSE(tokenizer.vocab().add_bos);  // the config overrides the template
  EXPECT_EQ(tokenizer.vocab().bos_id, 1);
  EXPECT_EQ(tokenizer_json_path(dir), dir + "/tokenizer.json");
  // A model whose embedding has more rows than the tokenizer lists: padded with unused ids.
  EXPECT_EQ(load_tokenizer(dir, "", 300).vocab().size(), 300);
  EXPECT_EQ(tokenizer_json_path(dir + "/tokenizer.json"), dir + "/tokenizer.json");
  std::filesystem::remove_all(dir);
}

TEST(HfTokenizerJson, ErrorsNameTheProblem) {
  auto message = [](const std::string& text) -> std::string {
    try {
      vocab_from_tokenizer_json_text(text, "", "tok.json");
    } catch (const InputError& error) {
      return error.what();
    }
    return "accepted";
  };
  EXPECT_NE(message("{not json").find("tok.json"), std::string::npos);
  EXPECT_NE(message(R"({"model": {"type": "Unigram", "vocab": []}})").find("Unigram"), std::string::npos);
  json bad = byte_level_tokenizer_json(false);
  bad["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  EXPECT_NE(message(bad.dump()).find("Sideways"), std::string::npos);
  bad["pre_tokenizer"]["pretokenizers"][0] = {{"type", "UnicodeScripts"}};
  EXPECT_NE(message(bad.dump()).find("'UnicodeScripts'"), std::string::npos);
  bad = byte_level_tokenizer_json(false);
  bad["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Whitespace"}});  // after ByteLevel
  EXPECT_NE(message(bad.dump()).find("after ByteLevel"), std::string::npos);
  // SentencePiece-style: Whitespace would see spaces that are already "▁"; a space prefix
  // after a split goes on a piece HF has already cut; only "▁" as the replacement.
  json spm = small_spm_tokenizer_json(small_spm());
  spm["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
  EXPECT_NE(message(spm.dump()).find("'WhitespaceSplit'"), std::string::npos);
  spm["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", json::array({{{"type", "Digits"}}, {{"type", "Metaspace"}}})}};
  EXPECT_NE(message(spm.dump()).find("'always'"), std::string::npos);
  spm["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}};
  EXPECT_NE(message(spm.dump()).find("'_'"), std::string::npos);
  bad = byte_level_tokenizer_json(false);
  bad["model"]["vocab"]["x"] = -5;
  EXPECT_NE(message(bad.dump()).find("-5"), std::string::npos);
  bad = byte_level_tokenizer_json(false);
  bad["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_THROW(Tokenizer(vocab_from_tokenizer_json_text(bad.dump(), "", "t")), InputError);
}

}  // namespace
}  // namespace tandem
