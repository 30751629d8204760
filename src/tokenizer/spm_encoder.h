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
  // A piece of normalized text longer than `part_bytes` is merged in parts (encode_piece),
  // each cut where no piece can span it, so the ids are those of merging it whole (tests
  // check it with small parts). Where no such cut is found before `max_part_bytes` (text
  // without spaces that vocabulary pieces overlap all along, such as one letter repeated),
  // the part ends at the character boundary before max_part_bytes: the merge state of a part
  // (32 bytes a character) and its time stay bounded however long the text, at the price of
  // ids that may differ from a whole merge in the few tokens around such a cut.
  static constexpr size_t kPartBytes = 64 << 10;
  static constexpr size_t kMaxPartBytes = 256 << 10;
  explicit SpmEncoder(const Vocab& vocab, size_t part_bytes = kPartBytes, size_t max_part_bytes = kMaxPartBytes);

  void encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids,
              const EncodeCheckpoint& checkpoint) const override;

 private:
  // Lets the piece map be searched with a string_view into the text being encoded.
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  // The id of a piece that merging may produce (Normal or UserDefined), or -1.
  int32_t mergeable_id(std::string_view piece) const;
  // Merges within one piece of normalized text and appends its ids: a long piece in parts
  // (split_point, else a cut at max_part_bytes_), each merged alone after a checkpoint, so
  // that the merge state of megabytes of text is never held at once.
  void encode_piece(std::string_view normalized, std::vector<int32_t>& ids, const EncodeCheckpoint& checkpoint) const;
  void merge_and_append(std::string_view normalized, std::vector<int32_t>& ids) const;
  // A position in [from, limit) where `normalized` can be cut without changing its ids (no
  // piece that merging may produce spans it: the merges on either side never meet), tried at
  // kSplitTries "▁" and then at as many character boundaries; npos when none was found.
  size_t split_point(std::string_view normalized, size_t from, size_t limit) const;
  bool spanned(std::string_view normalized, size_t p) const;
  void append_fallback(std::string_view symbol, std::vector<int32_t>& ids) const;

  const Vocab& vocab_;
  PreTokenizer pre_tokenizer_;
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> mergeable_;
  std::array<int32_t, 256> byte_token_{};  // byte value -> its <0xXX> token, -1 if none
  size_t max_mergeable_bytes_ = 1;         // the longest piece in mergeable_
  const size_t part_bytes_;
  const size_t max_part_bytes_;  // at least part_bytes_ (and a UTF-8 character)
};

}  // namespace tandem
