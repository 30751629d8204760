// Vocab: the token table a tokenizer works from — pieces, merge scores and token types —
// read from a GGUF's tokenizer.ggml.* keys or from a llama2.c tokenizer.bin. Both sources
// end up in SentencePiece form (spaces stored as U+2581) so the encoder sees one shape.
// Parsing only: encoding and decoding live in tokenizer.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

class GgufFile;

// The SentencePiece token types, numbered as GGUF's tokenizer.ggml.token_type stores them.
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6
};

struct Vocab {
  std::vector<std::string> pieces;  // [vocab_size] SentencePiece form: spaces stored as "▁"
  std::vector<float> scores;        // [vocab_size] higher merges first
  std::vector<TokenType> types;     // [vocab_size]
  int32_t bos_id = 1, eos_id = 2, unk_id = 0;
  bool add_bos = true;           // tokenizer.ggml.add_bos_token (default true for llama)
  bool add_space_prefix = true;  // tokenizer.ggml.add_space_prefix (default true)

  int64_t size() const { return static_cast<int64_t>(pieces.size()); }
};

// The vocab embedded in a GGUF. tokenizer.ggml.model must be "llama" (SentencePiece BPE);
// anything else is an InputError naming the model kind.
Vocab vocab_from_gguf(const GgufFile& file);

// A llama2.c tokenizer.bin: int32 max_token_length, then per token float32 score, int32
// length, bytes. `vocab_size` <= 0 reads entries up to the end of the file. Truncated or
// malformed files throw InputError naming `path`.
Vocab vocab_from_llama2c(const std::string& path, int64_t vocab_size);

// "<0xXX>" -> the byte value; -1 for any other piece.
int parse_byte_piece(const std::string& piece);

}  // namespace tandem
