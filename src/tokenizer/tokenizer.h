// Tokenizer: text to ids and back over a Vocab of either kind — SentencePiece BPE or
// byte-level BPE (the TextEncoder behind it) — plus BOS and atomic special-token matching.
// Immutable after construction, so one instance serves every request from any thread;
// copies share the vocabulary. Streaming decode is streaming_detokenizer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/text_encoder.h"
#include "tokenizer/vocab.h"

namespace tandem {

class Tokenizer {
 public:
  // Throws InputError when the vocab is inconsistent (sizes differ, special ids out of range)
  // or a byte-level pre-tokenizer regex does not compile.
  explicit Tokenizer(Vocab vocab);

  // Text (any bytes; ill-formed UTF-8 falls back to byte tokens) -> ids, BOS first if asked
  // and the vocabulary has one. Control-token text such as "<s>" or "<|endoftext|>" is
  // encoded as plain text; user-defined (added, non-special) tokens are always matched whole,
  // as Hugging Face and llama.cpp match them.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const {
    return encode(text, add_bos, /*parse_special=*/false);
  }
  // As above; with `parse_special`, control tokens written in the text are matched whole too
  // (longest first), for chat templates whose markup is special tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;

  // The raw bytes of one token: "▁" -> " ", "<0x0A>" -> "\n", "Ġ" -> " " (byte-level),
  // control/unused -> "". May be part of a UTF-8 character. InputError when out of range.
  std::string token_bytes(int32_t id) const;

  // Joins token_bytes, dropping the one leading space the space-prefix rule added to the
  // first token (at the start or right after BOS); ill-formed UTF-8 becomes U+FFFD.
  std::string decode(std::span<const int32_t> ids) const;

  // True when decode drops the leading space of the token that follows `previous_id`
  // (-1: the start of the sequence). Shared with the streaming detokenizer.
  bool strips_space_after(int32_t previous_id) const {
    return vocab_->kind == VocabKind::Spm && vocab_->add_space_prefix &&
           (previous_id < 0 || previous_id == vocab_->bos_id);
  }

  const Vocab& vocab() const { return *vocab_; }

 private:
  // Where the next special token in `text` starts at or after `from`: its id and position;
  // id -1 when there is none.
  std::pair<int32_t, size_t> find_special(std::string_view text, size_t from,
                                          bool parse_special) const;

  // Heap-held so the encoder's reference to the vocab survives moves of the Tokenizer.
  std::shared_ptr<const Vocab> vocab_;
  std::shared_ptr<const TextEncoder> encoder_;
  std::vector<std::string> bytes_;  // [vocab_size] token_bytes
  // Tokens matched whole in text, longest piece first: UserDefined always, Control only
  // with parse_special.
  std::vector<int32_t> specials_;
};

}  // namespace tandem
