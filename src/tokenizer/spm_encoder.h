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
  // A piece of normalized text longer than `part_bytes` is merged in parts (encode_piece;
  // the ids are the same, which tests check with small parts).
  static constexpr size_t kPartBytes = 64 << 10;
  explicit SpmEncoder(const Vocab& vocab, size_t part_bytes = kPartBytes);

  void encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids) const override;

 private:
  // Lets the piece map be searched with a string_view into the text being encoded.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // The id of a piece that merging may produce (Normal or UserDefined), or -1.
  int32_t mergeable_id(std::string_view piece) const;
  // Merges within one piece of normalized text and appends its ids: a long piece in parts
  // (split_point), each merged alone, so that the merge state of megabytes of text is never
  // held at once (it is 32 bytes a character).
  void encode_piece(std::string_view normalized, std::vector<int32_t>& ids) const;
  void merge_and_append(std::string_view normalized, std::vector<int32_t>& ids) const;
  // A position at or after `from` where `normalized` can be cut without changing its ids (no
  // piece that merging may produce spans it: the merges on either side never meet), tried
  // before each "▁" for a while; npos when none was found.
  size_t split_point(std::string_view normalized, size_t from) const;
  void append_fallback(std::string_view symbol, std::vector<int32_t>& ids) const;

  const Vocab& vocab_;
  PreTokenizer pre_tokenizer_;
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> mergeable_;
  std::array<int32_t, 256> byte_token_{};  // byte value -> its <0xXX> token, -1 if none
  size_t max_mergeable_bytes_ = 1;         // the longest piece in mergeable_
  const size_t part_bytes_;
};

}  // namespace tandem
