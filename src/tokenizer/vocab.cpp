// Reading vocabularies: GGUF tokenizer.ggml.* metadata and llama2.c tokenizer.bin files.
// Every count, length and id is checked against the file; bad input throws InputError.
#include "tokenizer/vocab.h"

#include <cstring>
#include <fstream>
#include <iterator>

#include "base/error.h"
#include "io/gguf_file.h"
#include "tokenizer/pre_tokenizer.h"

namespace tandem {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, SentencePiece's space

std::string spaces_to_markers(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == ' ') {
      out += kSpaceMarker;
    } else {
      out += c;
    }
  }
  return out;
}

void check_special_id(const Vocab& vocab, int64_t id, const char* what, const std::string& where) {
  TANDEM_CHECK_INPUT(id >= 0 && id < vocab.size(), "{}: {} id {} is outside the vocabulary of {}", where, what, id,
                     vocab.size());
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

int parse_byte_piece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return -1;
  int hi = hex_digit(piece[3]), lo = hex_digit(piece[4]);
  if (hi < 0 || lo < 0) return -1;
  return hi * 16 + lo;
}

Vocab vocab_from_gguf(const GgufFile& file) {
  const std::string where = file.mapping() ? file.mapping()->path() : "GGUF vocabulary";
  std::optional<std::string> model = file.get_string("tokenizer.ggml.model");
  TANDEM_CHECK_INPUT(model.has_value(), "{}: tokenizer.ggml.model is missing", where);
  TANDEM_CHECK_INPUT(*model == "llama" || *model == "gpt2",
                     "{}: tokenizer model '{}' is not supported (only 'llama', SentencePiece BPE, "
                     "and 'gpt2', byte-level BPE)",
                     where, *model);
  const bool spm = *model == "llama";

  Vocab vocab;
  vocab.kind = spm ? VocabKind::Spm : VocabKind::ByteLevelBpe;
  std::optional<std::vector<std::string>> tokens = file.get_string_array("tokenizer.ggml.tokens");
  TANDEM_CHECK_INPUT(tokens.has_value() && !tokens->empty(), "{}: tokenizer.ggml.tokens is missing", where);
  vocab.pieces = std::move(*tokens);
  const size_t n = vocab.pieces.size();

  if (std::optional<std::vector<float>> scores = file.get_float_array("tokenizer.ggml.scores")) {
    TANDEM_CHECK_INPUT(scores->size() == n, "{}: {} scores for {} tokens", where, scores->size(), n);
    vocab.scores = std::move(*scores);
  } else {
    vocab.scores.assign(n, 0.0f);
  }

  if (std::optional<std::vector<int64_t>> types = file.get_int_array("tokenizer.ggml.token_type")) {
    TANDEM_CHECK_INPUT(types->size() == n, "{}: {} token types for {} tokens", where, types->size(), n);
    vocab.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      int64_t t = (*types)[i];
      TANDEM_CHECK_INPUT(t >= 0 && t <= static_cast<int64_t>(TokenType::Byte), "{}: token {} has unknown type {}",
                         where, i, t);
      vocab.types.push_back(static_cast<TokenType>(t));
    }
  }

  // Checked as 64-bit values so a huge id cannot pass by wrapping in the int32 cast. Byte-level
  // vocabularies often have no BOS or UNK: absent means -1 there.
  auto special_id = [&](const char* key, int64_t spm_default, const char* what) {
    const std::optional<int64_t> stored = file.get_int(key);
    if (!stored && !spm) return int32_t{-1};
    const int64_t id = stored.value_or(spm_default);
    check_special_id(vocab, id, what, where);
    return static_cast<int32_t>(id);
  };
  vocab.bos_id = special_id("tokenizer.ggml.bos_token_id", 1, "BOS");
  vocab.eos_id = special_id("tokenizer.ggml.eos_token_id", 2, "EOS");
  vocab.unk_id = special_id("tokenizer.ggml.unknown_token_id", 0, "unknown");
  const auto fim_id = [&](const char* key, const char* what) {
    const std::optional<int64_t> stored = file.get_int(key);
    if (!stored) return int32_t{-1};
    check_special_id(vocab, *stored, what, where);
    return static_cast<int32_t>(*stored);
  };
  vocab.fim_pre_id = fim_id("tokenizer.ggml.fim_pre_token_id", "FIM prefix");
  vocab.fim_suf_id = fim_id("tokenizer.ggml.fim_suf_token_id", "FIM suffix");
  vocab.fim_mid_id = fim_id("tokenizer.ggml.fim_mid_token_id", "FIM middle");
  vocab.fim_rep_id = fim_id("tokenizer.ggml.fim_rep_token_id", "FIM repository");
  vocab.fim_sep_id = fim_id("tokenizer.ggml.fim_sep_token_id", "FIM file separator");
  if (vocab.types.empty()) {
    // No token_type array: infer the types llama2.c implies, so byte pieces are byte tokens
    // and the specials are never formed by merging.
    vocab.types.assign(n, TokenType::Normal);
    for (size_t i = 0; spm && i < n; ++i) {
      if (parse_byte_piece(vocab.pieces[i]) >= 0) vocab.types[i] = TokenType::Byte;
    }
    if (vocab.unk_id >= 0) vocab.types[vocab.unk_id] = TokenType::Unknown;
    if (vocab.bos_id >= 0) vocab.types[vocab.bos_id] = TokenType::Control;
    if (vocab.eos_id >= 0) vocab.types[vocab.eos_id] = TokenType::Control;
  }
  // llama.cpp's defaults: SentencePiece adds BOS and the space prefix, byte-level BPE neither.
  vocab.add_bos = file.get_bool("tokenizer.ggml.add_bos_token").value_or(spm);
  vocab.add_space_prefix = file.get_bool("tokenizer.ggml.add_space_prefix").value_or(spm);
  if (spm) return vocab;

  std::optional<std::vector<std::string>> merges = file.get_string_array("tokenizer.ggml.merges");
  TANDEM_CHECK_INPUT(merges.has_value(), "{}: gpt2 vocabulary has no tokenizer.ggml.merges", where);
  vocab.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string& merge = (*merges)[i];
    // Searching from 1 lets a left side that is itself a space (non-byte-level vocabs) work.
    const size_t space = merge.find(' ', 1);
    TANDEM_CHECK_INPUT(space != std::string::npos && space + 1 < merge.size(),
                       "{}: merge {} '{}' is not two pieces separated by a space", where, i, merge);
    vocab.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
  }
  const std::string pre = file.get_string("tokenizer.ggml.pre").value_or("default");
  try {
    vocab.pre_regexes = pre_tokenizer_regexes(pre);
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: {}", where, error.what()));
  }
  // llama.cpp emits a pre-token that is already a token without merging for Llama 3.
  vocab.ignore_merges = pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe";
  return vocab;
}

Vocab vocab_from_llama2c(const std::string& path, int64_t vocab_size) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK_INPUT(in.good(), "{}: cannot open tokenizer file", path);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  TANDEM_CHECK_INPUT(!in.bad(), "{}: cannot read tokenizer file", path);

  size_t pos = 0;
  auto read_raw = [&](void* dst, size_t n, int64_t token) {
    TANDEM_CHECK_INPUT(bytes.size() - pos >= n, "{}: tokenizer file is truncated (token {} of {}, offset {}, size {})",
                       path, token, vocab_size, pos, bytes.size());
    std::memcpy(dst, bytes.data() + pos, n);
    pos += n;
  };

  int32_t max_token_length = 0;
  read_raw(&max_token_length, sizeof max_token_length, 0);
  TANDEM_CHECK_INPUT(max_token_length > 0, "{}: bad max_token_length {} (not a tokenizer.bin?)", path,
                     max_token_length);

  Vocab vocab;
  for (int64_t i = 0; vocab_size > 0 ? i < vocab_size : pos < bytes.size(); ++i) {
    float score = 0;
    int32_t length = 0;
    read_raw(&score, sizeof score, i);
    read_raw(&length, sizeof length, i);
    TANDEM_CHECK_INPUT(length >= 0 && length <= max_token_length, "{}: token {} has length {} (max_token_length {})",
                       path, i, length, max_token_length);
    std::string piece(static_cast<size_t>(length), '\0');
    read_raw(piece.data(), piece.size(), i);
    vocab.pieces.push_back(spaces_to_markers(piece));
    vocab.scores.push_back(score);
  }
  // llama2.c hard-codes the special ids: 0 unknown, 1 BOS, 2 EOS.
  TANDEM_CHECK_INPUT(vocab.size() >= 3, "{}: only {} tokens (need at least 3)", path, vocab.size());
  vocab.types.resize(vocab.pieces.size(), TokenType::Normal);
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    if (parse_byte_piece(vocab.pieces[i]) >= 0) vocab.types[i] = TokenType::Byte;
  }
  vocab.types[0] = TokenType::Unknown;
  vocab.types[1] = TokenType::Control;
  vocab.types[2] = TokenType::Control;
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  return vocab;
}

}  // namespace tandem
