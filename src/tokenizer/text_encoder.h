// TextEncoder: the algorithm that turns a run of plain text (no special tokens in it) into
// ids — SentencePiece BPE (spm_encoder.h) or byte-level BPE (bpe_encoder.h). Tokenizer owns
// one and does the rest: BOS, special-token matching, decoding.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tandem {

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;

  // Appends the ids of `text` to `ids`. `starts_sequence`: the text opens the sequence or
  // follows a special token (SentencePiece adds its space prefix only there).
  virtual void encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids) const = 0;
};

}  // namespace tandem
