// GBNF string literals (gbnf_literal.h).
#include "grammar/gbnf_literal.h"

#include <cstdint>

#include <fmt/format.h>

namespace tandem::grammar {

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto b = static_cast<uint8_t>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (b < 0x20) {
      out += fmt::format("\\x{:02X}", b);
    } else {
      out += c;  // UTF-8 bytes pass through: a literal matches its bytes
    }
  }
  return out + "\"";
}

}  // namespace tandem::grammar
