// GPT-2's byte <-> character mapping for byte-level BPE: every byte is shown as one printable
// character (printable Latin-1 bytes as themselves, the rest as U+0100 onwards), so token
// pieces are valid UTF-8 strings while the text they stand for can be any bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tandem {

// The character (as UTF-8) that stands for `byte` in byte-level pieces ("Ġ" for a space).
const std::string& byte_to_piece_char(uint8_t byte);

// The bytes a byte-level piece stands for. A character outside the mapping (a hand-added
// token, say) is kept as its own UTF-8 bytes, and ill-formed UTF-8 is kept as is.
std::string byte_level_decode(std::string_view piece);

// The byte-level form of raw bytes: each byte replaced by its character.
std::string byte_level_encode(std::string_view bytes);

}  // namespace tandem
