// UTF-8 helpers for the tokenizer (and the chat-template engine): encoding a code point,
// splitting text into characters for the encoder, and a streaming sanitizer that turns
// ill-formed bytes into U+FFFD. Decoding (whole or streaming) goes through the same
// sanitizer, so an incremental decode always equals a full one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

// Appends code point c (at most 0x10FFFF) as UTF-8.
void append_utf8(std::string& out, char32_t c);

// Length of the well-formed UTF-8 sequence starting at text[pos], or 1 when the bytes there
// are not one (a stray continuation byte, a bad lead byte, a truncated or overlong sequence).
size_t utf8_sequence_length(std::string_view text, size_t pos);

// The start of the character (as utf8_sequence_length splits `text` from its start) that
// holds text[pos]: pos itself unless pos is inside a well-formed multi-byte sequence. A
// place to cut text without splitting a character. pos < text.size().
size_t utf8_character_start(std::string_view text, size_t pos);

// A UTF-8 decoder that replaces each maximal ill-formed subpart with U+FFFD (the Unicode /
// WHATWG rule). It decides each byte as soon as it can, so feeding bytes in any chunking
// produces the same output; an incomplete but still valid tail is held until the next feed.
class Utf8Sanitizer {
 public:
  // Appends to `out` every character completed by `bytes`; never half a character.
  void feed(std::string_view bytes, std::string& out);
  // Appends U+FFFD for a held incomplete sequence (it can no longer complete) and resets.
  void finish(std::string& out);
  bool holding() const { return n_held_ > 0; }

 private:
  void feed_byte(uint8_t b, std::string& out);

  char held_[4] = {};
  int n_held_ = 0;
  int n_needed_ = 0;        // total length of the sequence being held
  uint8_t next_lo_ = 0x80;  // allowed range of the next continuation byte
  uint8_t next_hi_ = 0xBF;
};

// The whole of `bytes` through a Utf8Sanitizer: valid UTF-8 out, unchanged if it was valid.
std::string sanitize_utf8(std::string_view bytes);

}  // namespace tandem
