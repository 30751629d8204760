// GBNF parser: llama.cpp's grammar text (`root ::= ...`, "literals", [character classes]
// with ^ and escapes, `.`, groups, * + ? {m} {m,} {m,n}, # comments) to a Grammar. Code
// points are lowered to UTF-8 byte ranges and repetition to helper rules here; the result
// is checked by GrammarBuilder (undefined, left-recursive or never-finishing rules). Bad
// text is an InputError of one line naming the position and the rule being parsed.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace tandem::grammar {

// Throws InputError: "grammar: line 3, column 14 (rule 'item'): expected ']'".
Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace tandem::grammar
