// GBNF text for the grammar writers (json_schema.cpp, regex_grammar.cpp, string_formats.cpp):
// a string literal matching exactly some bytes, escaped so the GBNF parser reads it back.
#pragma once

#include <string>
#include <string_view>

namespace tandem::grammar {

// "..." matching exactly `bytes`: quote and backslash escaped, \n \r \t by name, other
// control bytes as \xHH; UTF-8 bytes pass through (a literal matches its bytes).
std::string gbnf_literal(std::string_view bytes);

}  // namespace tandem::grammar
