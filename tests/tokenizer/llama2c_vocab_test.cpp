// llama2.c vocabularies: the aidreams260K greedy references (prompt encodings and decoded
// text) with tok512.bin and with the same vocab embedded in model.gguf; load_tokenizer's
// lookup rules; truncated or malformed tokenizer.bin files are InputErrors naming the path.
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/load_tokenizer.h"
#include "tokenizer_test_util.h"

namespace tandem {
namespace {

using testing::shared_path;

std::string aidreams(const std::string& name) { return std::string(testing::kAidreamsDir) + "/" + name; }

struct Reference {
  std::string prompt;
  std::vector<int32_t> ids;
  std::string text;
};

std::vector<Reference> load_references() {
  std::vector<Reference> references;
  std::istringstream lines(testing::read_file(shared_path(aidreams("greedy-reference.jsonl"))));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const nlohmann::json json = nlohmann::json::parse(line);
    references.push_back({json.at("prompt").get<std::string>(), json.at("ids").get<std::vector<int32_t>>(),
                          json.at("text").get<std::string>()});
  }
  return references;
}

void expect_matches_references(const Tokenizer& tokenizer) {
  const std::vector<Reference> references = load_references();
  ASSERT_FALSE(references.empty());
  for (const Reference& reference : references) {
    SCOPED_TRACE("prompt: '" + reference.prompt + "'");
    ASSERT_FALSE(reference.ids.empty());
    EXPECT_EQ(reference.ids.front(), tokenizer.vocab().bos_id);
    // The prompt's encoding (with BOS) must be a prefix of the run's ids.
    const std::vector<int32_t> prompt_ids = tokenizer.encode(reference.prompt, true);
    ASSERT_LE(prompt_ids.size(), reference.ids.size());
    EXPECT_TRUE(std::equal(prompt_ids.begin(), prompt_ids.end(), reference.ids.begin()));
    const std::string decoded = tokenizer.decode(reference.ids);
    EXPECT_TRUE(decoded.starts_with(reference.prompt));
    EXPECT_EQ(decoded, reference.text);
  }
}

TEST(Llama2cVocab, Tok512MatchesGreedyReference) {
  TANDEM_REQUIRE_SHARED(aidreams("tok512.bin"));
  TANDEM_REQUIRE_SHARED(aidreams("greedy-reference.jsonl"));
  const Tokenizer tokenizer(vocab_from_llama2c(shared_path(aidreams("tok512.bin")), 512));
  EXPECT_EQ(tokenizer.vocab().types[0], TokenType::Unknown);
  EXPECT_EQ(tokenizer.vocab().types[1], TokenType::Control);
  EXPECT_EQ(tokenizer.vocab().types[3 + 0x0A], TokenType::Byte);
  EXPECT_EQ(tokenizer.token_bytes(3 + 0x0A), "\n");
  EXPECT_EQ(tokenizer.token_bytes(1), "");
  expect_matches_references(tokenizer);
}

TEST(Llama2cVocab, EmbeddedGgufVocabMatchesGreedyReference) {
  TANDEM_REQUIRE_SHARED(aidreams("model.gguf"));
  TANDEM_REQUIRE_SHARED(aidreams("greedy-reference.jsonl"));
  expect_matches_references(testing::gguf_tokenizer(aidreams("model.gguf")));
}

TEST(Llama2cVocab, BothSourcesAgree) {
  TANDEM_REQUIRE_SHARED(aidreams("tok512.bin"));
  TANDEM_REQUIRE_SHARED(aidreams("model.gguf"));
  const Tokenizer from_bin(vocab_from_llama2c(shared_path(aidreams("tok512.bin")), 512));
  const Tokenizer from_gguf = testing::gguf_tokenizer(aidreams("model.gguf"));
  // Same pieces except the specials, which llama2.c's exporter wrote as "\n<s>\n" etc.
  ASSERT_EQ(from_bin.vocab().size(), from_gguf.vocab().size());
  EXPECT_TRUE(std::equal(from_bin.vocab().pieces.begin() + 3, from_bin.vocab().pieces.end(),
                         from_gguf.vocab().pieces.begin() + 3));
  EXPECT_EQ(from_bin.vocab().types, from_gguf.vocab().types);
  EXPECT_EQ(from_bin.vocab().scores, from_gguf.vocab().scores);
  for (const char* text : {"Echoes of light and dreams", "  a  b \n c", "ö ε λ μ 中"}) {
    EXPECT_EQ(from_bin.encode(text, true), from_gguf.encode(text, true)) << text;
  }
}

TEST(Llama2cVocab, ReadsToEndWithoutSize) {
  TANDEM_REQUIRE_SHARED(aidreams("tok512.bin"));
  EXPECT_EQ(vocab_from_llama2c(shared_path(aidreams("tok512.bin")), 0).size(), 512);
}

TEST(Llama2cVocab, LoadTokenizerFindsTheModelsTokenizer) {
  TANDEM_REQUIRE_SHARED(aidreams("model.bin"));
  EXPECT_EQ(llama2c_header_vocab_size(shared_path(aidreams("model.bin"))), 512);
  const Tokenizer found = load_tokenizer(shared_path(aidreams("model.bin")), "", 0);
  EXPECT_EQ(found.vocab().size(), 512);
  EXPECT_EQ(found.encode("The dream", true), (std::vector<int32_t>{1, 368, 430, 281, 269, 435, 447}));
  const Tokenizer gguf = load_tokenizer(shared_path(aidreams("model.gguf")), "", 0);
  EXPECT_EQ(gguf.encode("The dream", true), found.encode("The dream", true));
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() / fmt::format("tandem-tokenizer-test-{}", ::getpid());
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A tiny well-formed tokenizer.bin: the three specials and "a", " b".
std::string tiny_tokenizer_bin() {
  std::string bytes;
  auto put = [&](const auto& value) { bytes.append(reinterpret_cast<const char*>(&value), sizeof value); };
  put(int32_t{7});
  for (const std::string piece : {"<unk>", "\n<s>\n", "\n</s>\n", "a", " b"}) {
    put(float{0});
    put(static_cast<int32_t>(piece.size()));
    bytes += piece;
  }
  return bytes;
}

TEST(Llama2cVocab, TruncatedFileIsInputErrorNamingThePath) {
  TempDir dir;
  const std::string whole = tiny_tokenizer_bin();
  const std::string good = dir.file("tok_good.bin");
  write_file(good, whole);
  const Vocab vocab = vocab_from_llama2c(good, 5);
  EXPECT_EQ(vocab.pieces[4], "\xE2\x96\x81"
                             "b");  // real spaces become "▁"

  for (size_t cut : {size_t{0}, size_t{2}, size_t{4}, size_t{9}, whole.size() - 1}) {
    const std::string path = dir.file(fmt::format("tok_cut{}.bin", cut));
    write_file(path, whole.substr(0, cut));
    try {
      vocab_from_llama2c(path, 5);
      ADD_FAILURE() << "no error for a file cut at " << cut;
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
    }
  }
  // Asking for more tokens than the file holds is the same truncation.
  EXPECT_THROW(vocab_from_llama2c(good, 6), InputError);
  EXPECT_THROW(vocab_from_llama2c(dir.file("missing.bin"), 5), InputError);

  TANDEM_REQUIRE_SHARED(aidreams("tok512.bin"));
  const std::string real = testing::read_file(shared_path(aidreams("tok512.bin")));
  const std::string cut_real = dir.file("tok512_cut.bin");
  write_file(cut_real, real.substr(0, real.size() - 3));
  EXPECT_THROW(vocab_from_llama2c(cut_real, 512), InputError);
}

TEST(Llama2cVocab, NegativeLengthIsInputError) {
  TempDir dir;
  std::string bytes = tiny_tokenizer_bin();
  const int32_t negative = -5;
  bytes.replace(4 + 4, 4, reinterpret_cast<const char*>(&negative), 4);  // token 0's length
  const std::string path = dir.file("tok_negative.bin");
  write_file(path, bytes);
  EXPECT_THROW(vocab_from_llama2c(path, 5), InputError);
}

TEST(Llama2cVocab, MissingTokenizerIsInputError) {
  TempDir dir;
  const std::string model = dir.file("model.bin");
  write_file(model, std::string(28, '\0'));
  EXPECT_THROW(load_tokenizer(model, "", 512), InputError);
}

}  // namespace
}  // namespace tandem
