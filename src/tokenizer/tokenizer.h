// Tokenizer: text to ids and back over a Vocab of either kind — SentencePiece BPE or
// byte-level BPE (the TextEncoder behind it) — plus BOS and atomic special-token matching.
// Immutable after construction, so one instance serves every request from any thread;
// copies share the vocabulary. Streaming decode is streaming_detokenizer.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/text_encoder.h"
#include "tokenizer/vocab.h"

namespace tandem {

// A byte range [begin, end) of a text.
struct TextSpan {
  size_t begin = 0, end = 0;
};

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
  // (longest first), for chat templates whose markup is special tokens. `checkpoint`, if
  // set, is called between the bounded parts the encoder merges (text_encoder.h): throwing
  // from it stops a long encoding there (a server whose client has left).
  std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special,
                              const EncodeCheckpoint& checkpoint = {}) const;
  // As above, but a control token is matched only where its whole piece lies inside one of
  // `special_spans` (sorted, non-overlapping, within `text`): a chat prompt marks the
  // template's own text so that turn markers typed inside a message stay plain text.
  // User-defined tokens are matched anywhere. The text between matched tokens is encoded as
  // one run, as with parse_special: spans covering all of `text` give parse_special=true's
  // ids, no spans give parse_special=false's.
  std::vector<int32_t> encode(std::string_view text, bool add_bos, std::span<const TextSpan> special_spans,
                              const EncodeCheckpoint& checkpoint = {}) const;

  // The piece of a control token that occurs in `text` (the longest, if several do); empty
  // when none does. For callers that must refuse text whose control tokens would be lost.
  std::string_view find_control_text(std::string_view text) const;

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

  // The fewest tokens a text of `bytes` bytes can encode to (BOS not counted): no token
  // stands for more input bytes than its piece holds, nor an unknown character's UNK for
  // more than 4. A text too long for a context is known to be without encoding it.
  int64_t min_tokens_of(size_t bytes) const {
    return static_cast<int64_t>((bytes + max_token_bytes_ - 1) / max_token_bytes_);
  }

 private:
  // Where the next special token in `text` starts at or after `from`: its id and position;
  // id -1 when there is none. Control tokens count only inside one of `special_spans`.
  // `next_at` ([specials_.size()], kNotSearched at first) carries each piece's next
  // occurrence from one call to the next within one encode().
  std::pair<int32_t, size_t> find_special(std::string_view text, size_t from, std::span<const TextSpan> special_spans,
                                          std::vector<size_t>& next_at) const;
  // The first occurrence of special `id` at or after `from` (a control token: inside one
  // span); npos when there is none.
  size_t find_piece(std::string_view text, size_t from, int32_t id, std::span<const TextSpan> special_spans) const;
  static constexpr size_t kNotSearched = std::string_view::npos - 1;

  // Heap-held so the encoder's reference to the vocab survives moves of the Tokenizer.
  std::shared_ptr<const Vocab> vocab_;
  std::shared_ptr<const TextEncoder> encoder_;
  std::vector<std::string> bytes_;  // [vocab_size] token_bytes
  size_t max_token_bytes_ = 4;      // the longest token_bytes or piece; at least a UTF-8 character
  // Tokens matched whole in text, longest piece first: UserDefined always, Control only
  // with parse_special or inside a special span.
  std::vector<int32_t> specials_;
};

}  // namespace tandem
