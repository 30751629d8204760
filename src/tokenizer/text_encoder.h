// TextEncoder: the algorithm that turns a run of plain text (no special tokens in it) into
// ids — SentencePiece BPE (spm_encoder.h) or byte-level BPE (bpe_encoder.h). Tokenizer owns
// one and does the rest: BOS, special-token matching, decoding.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace tandem {

// Called by an encoder between the parts it merges (a pre-tokenizer piece, or a part of a
// long one: each is bounded, see the encoders), so that the caller of a long encoding can
// stop it: the checkpoint throws, and the exception leaves encode. Empty: never called.
using EncodeCheckpoint = std::function<void()>;

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;

  // Appends the ids of `text` to `ids`. `starts_sequence`: the text opens the sequence or
  // follows a special token (SentencePiece adds its space prefix only there).
  virtual void encode(std::string_view text, bool starts_sequence, std::vector<int32_t>& ids,
                      const EncodeCheckpoint& checkpoint) const = 0;
};

}  // namespace tandem
