// The byte-level mapping (see byte_level.h), built once as two small constant tables.
#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace tandem {
namespace {

struct ByteTables {
  std::array<std::string, 256> byte_to_char;
  std::array<int16_t, 512> char_to_byte;  // code point (< 512) -> byte, -1 if none
};

// Bytes that are printable and not space stand for themselves; the other 68 take code points
// 256, 257, ... in byte order, which is what makes the mapping GPT-2's.
ByteTables make_tables() {
  ByteTables tables;
  tables.char_to_byte.fill(-1);
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    const uint32_t cp = printable ? b : next++;
    append_utf8(tables.byte_to_char[b], cp);
    tables.char_to_byte[cp] = static_cast<int16_t>(b);
  }
  return tables;
}

const ByteTables& tables() {
  static const ByteTables kTables = make_tables();
  return kTables;
}

}  // namespace

const std::string& byte_to_piece_char(uint8_t byte) { return tables().byte_to_char[byte]; }

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += tables().byte_to_char[static_cast<uint8_t>(c)];
  return out;
}

std::string byte_level_decode(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    const size_t length = utf8_sequence_length(piece, pos);
    const auto b0 = static_cast<uint8_t>(piece[pos]);
    int32_t cp = -1;
    if (length == 1 && b0 < 0x80) {
      cp = b0;
    } else if (length == 2) {
      cp = ((b0 & 0x1F) << 6) | (static_cast<uint8_t>(piece[pos + 1]) & 0x3F);
    }
    const int16_t byte = cp >= 0 && cp < 512 ? tables().char_to_byte[cp] : int16_t{-1};
    if (byte >= 0) {
      out += static_cast<char>(byte);
    } else {
      out.append(piece.substr(pos, length));
    }
    pos += length;
  }
  return out;
}

}  // namespace tandem
