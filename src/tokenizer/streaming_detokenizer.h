// StreamingDetokenizer: turns generated ids into text one token at a time for streaming
// output. It never emits half a UTF-8 character (byte tokens can split one), and everything
// it emits, plus finish(), equals Tokenizer::decode of the same ids. One per sequence.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tandem {

class StreamingDetokenizer {
 public:
  // Keeps a reference: `tokenizer` must outlive this object.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer);

  // The text completed by this token (possibly empty while a character is incomplete).
  std::string push(int32_t id);
  // Whatever is held back; an incomplete character becomes U+FFFD. Resets the stream.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  Utf8Sanitizer sanitizer_;
  int32_t previous_id_ = -1;  // -1: nothing pushed yet
};

}  // namespace tandem
