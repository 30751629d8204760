// Vocab: the token table a tokenizer works from — pieces, scores or merges, token types —
// read from a GGUF's tokenizer.ggml.* keys, a llama2.c tokenizer.bin (both SentencePiece,
// spaces stored as U+2581) or a GGUF of byte-level BPE (gpt2). tokenizer.json is
// hf_tokenizer_json.h. Parsing only: encoding and decoding live in tokenizer.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/pre_tokenizer.h"

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

// Which encoder a vocabulary needs.
enum class VocabKind {
  Spm,           // SentencePiece BPE: merges by piece score, "<0xXX>" byte fallback
  ByteLevelBpe,  // GPT-2 style: bytes mapped to printable characters, merges by rank
};

struct Vocab {
  VocabKind kind = VocabKind::Spm;
  std::vector<std::string> pieces;  // [vocab_size] Spm: spaces as "▁"; BPE: byte-level form
  std::vector<float> scores;        // [vocab_size] Spm: higher merges first; BPE: unused (0)
  std::vector<TokenType> types;     // [vocab_size]
  // Special ids; -1 means the vocabulary has none (byte-level vocabs often lack BOS/UNK).
  int32_t bos_id = 1, eos_id = 2, unk_id = 0;
  bool add_bos = true;           // tokenizer.ggml.add_bos_token (default true for llama)
  bool add_space_prefix = true;  // tokenizer.ggml.add_space_prefix (default true; BPE: false)
  // Fill-in-the-middle tokens (tokenizer.ggml.fim_{pre,suf,mid,rep,sep}_token_id); -1: not in
  // the metadata (server/llama_server_api.h then looks for their usual spellings).
  int32_t fim_pre_id = -1, fim_suf_id = -1, fim_mid_id = -1, fim_rep_id = -1, fim_sep_id = -1;

  // The pre-tokenizer: each step splits every piece the previous one produced. ByteLevelBpe
  // splits the raw text; Spm the text once spaces are "▁" (empty for SentencePiece itself).
  std::vector<PreSplit> pre_regexes;

  // ByteLevelBpe only.
  std::vector<std::pair<std::string, std::string>> merges;  // [n_merges] rank order
  // A pre-token that is itself in the vocabulary is emitted whole, merges skipped (Llama 3).
  bool ignore_merges = false;

  int64_t size() const { return static_cast<int64_t>(pieces.size()); }
};

// The vocab embedded in a GGUF. tokenizer.ggml.model must be "llama" (SentencePiece BPE) or
// "gpt2" (byte-level BPE, pre-tokenizer from tokenizer.ggml.pre); anything else is an
// InputError naming the model kind.
Vocab vocab_from_gguf(const GgufFile& file);

// A llama2.c tokenizer.bin: int32 max_token_length, then per token float32 score, int32
// length, bytes. `vocab_size` <= 0 reads entries up to the end of the file. Truncated or
// malformed files throw InputError naming `path`.
Vocab vocab_from_llama2c(const std::string& path, int64_t vocab_size);

// "<0xXX>" -> the byte value; -1 for any other piece.
int parse_byte_piece(const std::string& piece);

}  // namespace tandem
