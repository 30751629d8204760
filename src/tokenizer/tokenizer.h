// Tokenizer: SentencePiece-style BPE over a Vocab — text to ids (score-ordered merges with
// byte fallback) and ids back to bytes/text. Immutable after construction, so one instance
// serves every request from any thread. Streaming decode is streaming_detokenizer.h.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace tandem {

class Tokenizer {
 public:
  // Throws InputError when the vocab is inconsistent (sizes differ, special ids out of range).
  explicit Tokenizer(Vocab vocab);

  // Text (any bytes; ill-formed UTF-8 falls back to byte tokens) -> ids, BOS first if asked.
  // Special-token text such as "<s>" is encoded as plain text, never as the control token.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;

  // The raw bytes of one token: "▁" -> " ", "<0x0A>" -> "\n", control/unused -> "".
  // May be part of a UTF-8 character (byte tokens). InputError when `id` is out of range.
  std::string token_bytes(int32_t id) const;

  // Joins token_bytes, dropping the one leading space the space-prefix rule added to the
  // first token (at the start or right after BOS); ill-formed UTF-8 becomes U+FFFD.
  std::string decode(std::span<const int32_t> ids) const;

  // True when decode drops the leading space of the token that follows `previous_id`
  // (-1: the start of the sequence). Shared with the streaming detokenizer.
  bool strips_space_after(int32_t previous_id) const {
    return vocab_.add_space_prefix && (previous_id < 0 || previous_id == vocab_.bos_id);
  }

  const Vocab& vocab() const { return vocab_; }

 private:
  // Lets the piece map be searched with a string_view into the text being encoded.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // The id of a piece that merging may produce (Normal or UserDefined), or -1.
  int32_t mergeable_id(std::string_view piece) const;
  void append_fallback(std::string_view symbol, std::vector<int32_t>& ids) const;

  Vocab vocab_;
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> mergeable_;
  std::vector<std::string> bytes_;          // [vocab_size] token_bytes
  std::array<int32_t, 256> byte_token_{};   // byte value -> its <0xXX> token, -1 if none
};

}  // namespace tandem
