// SpmEncoder: SentencePiece-style BPE over a Vocab — spaces become "▁", the vocab's
// pre-tokenizer (if any: tokenizer.json's Metaspace split, Digits, ...) cuts the result into
// pieces, adjacent symbols of a piece merge highest piece score first (leftmost on ties), and
// characters with no piece fall back to "<0xXX>" byte tokens (or UNK). Immutable.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <unordered_map>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/text_encoder.h"
#include "tokenizer/vocab.h"

namespace tandem {

class SpmEncoder final : public TextEncoder {
 public:
  // Keeps a reference: `vocab` must outlive the encoder (Tokenizer holds both on the heap).
  explicit SpmEncoder(const Vocab& vocab);

  void encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids) const override;

 private:
  // Lets the piece map be searched with a string_view into the text being encoded.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // The id of a piece that merging may produce (Normal or UserDefined), or -1.
  int32_t mergeable_id(std::string_view piece) const;
  // Merges within one piece of normalized text and appends its ids.
  void encode_piece(std::string_view normalized, std::vector<int32_t>& ids) const;
  void append_fallback(std::string_view symbol, std::vector<int32_t>& ids) const;

  const Vocab& vocab_;
  PreTokenizer pre_tokenizer_;
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> mergeable_;
  std::array<int32_t, 256> byte_token_{};  // byte value -> its <0xXX> token, -1 if none
};

}  // namespace tandem
