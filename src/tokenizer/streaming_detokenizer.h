// StreamingDetokenizer: turns generated ids into text one token at a time for streaming
// output. It never emits half a UTF-8 character (byte tokens can split one), and everything
// it emits, plus finish(), equals Tokenizer::decode of the same ids (with the default options). One per sequence.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tandem {

// vLLM's detokenisation options. skip_special_tokens: control tokens (BOS, EOS, chat markup)
// print nothing; without it they print their text, and with spaces_between_special_tokens a
// space separates each from the text or control token before it and the text after it (as
// transformers' decode joins its pieces).
struct DetokenizeOptions {
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
};

class StreamingDetokenizer {
 public:
  // Keeps a reference: `tokenizer` must outlive this object. The default options give
  // Tokenizer::decode's text.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, DetokenizeOptions options = {});

  // The text completed by this token (possibly empty while a character is incomplete).
  std::string push(int32_t id);
  // Whatever is held back; an incomplete character becomes U+FFFD. Resets the stream.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  DetokenizeOptions options_;
  Utf8Sanitizer sanitizer_;
  int32_t previous_id_ = -1;       // -1: nothing pushed yet
  bool previous_special_ = false;  // the previous token printed as a control token
};

}  // namespace tandem
