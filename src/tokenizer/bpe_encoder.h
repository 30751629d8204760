// BpeEncoder: byte-level BPE (GPT-2, Llama 3, Qwen2, DeepSeek ...). The pre-tokenizer splits
// the text; each piece's bytes start as one symbol each (their byte-level characters) and
// adjacent symbols merge lowest merge rank first, leftmost on ties. Immutable after
// construction; merges are looked up by token-id pairs, never by building strings.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/text_encoder.h"
#include "tokenizer/vocab.h"

namespace tandem {

class BpeEncoder final : public TextEncoder {
 public:
  // Keeps a reference: `vocab` must outlive the encoder. InputError when a pre-tokenizer
  // regex does not compile.
  //
  // A pre-tokenizer piece longer than `max_piece_bytes` (no word is: only a degenerate text,
  // such as megabytes of one letter or of spaces, or a vocabulary without a split regex) is
  // merged in parts of at most that many bytes, each ending at a UTF-8 character boundary:
  // the merge state (about 60 bytes a byte) and time of one part stay bounded, at the price
  // of ids that may differ from a whole merge in the few tokens around each cut.
  static constexpr size_t kMaxPieceBytes = 64 << 10;
  explicit BpeEncoder(const Vocab& vocab, size_t max_piece_bytes = kMaxPieceBytes);

  void encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids,
              const EncodeCheckpoint& checkpoint) const override;

 private:
  struct Merge {
    int32_t rank = 0;
    int32_t result = 0;  // id of the merged token
  };
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  int32_t token_id(std::string_view piece) const;
  // Merges one piece in parts of at most max_piece_bytes_, each after a checkpoint.
  void encode_piece(std::string_view bytes, std::vector<int32_t>& ids, const EncodeCheckpoint& checkpoint) const;
  void merge_and_append(std::string_view bytes, std::vector<int32_t>& ids) const;

  const Vocab& vocab_;
  PreTokenizer pre_tokenizer_;
  // Pieces merging may produce (every type but Control/Unknown/Unused) -> id.
  std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>> token_ids_;
  std::unordered_map<uint64_t, Merge> merges_;  // pair_key(left id, right id) -> merge
  std::array<int32_t, 256> byte_ids_{};         // byte -> token of its character, -1 if none
  const size_t max_piece_bytes_;                // at least a UTF-8 character
};

}  // namespace tandem
