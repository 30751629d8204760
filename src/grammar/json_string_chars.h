#pragma once
// GBNF expressions for one character inside a JSON string, shared by the schema compiler and
// the regex translator. A \u escape names either a code point outside the surrogate range or a
// whole surrogate pair (high \uD800-\uDBFF then low \uDC00-\uDFFF): a lone surrogate is valid
// by JSON's grammar but not a Unicode string, and parsers (nlohmann, Python's json by default,
// JavaScript validators) reject it or keep garbage.

namespace tandem::grammar {

// Unescaped text, a named escape, \u with a non-surrogate code point, or a surrogate pair.
inline constexpr const char* kJsonStringChar =
    R"([^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | )"
    R"([dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2})))";

// One UTF-16 unit's worth: the Basic Multilingual Plane only, surrogates excluded, so that a
// length bound means the same to JSON Schema (code points) and to JavaScript validators
// (UTF-16 units).
inline constexpr const char* kJsonBmpStringChar =
    R"([^"\\\x00-\x1F\U00010000-\U0010FFFF] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | )"
    R"([dD] [0-7] [0-9a-fA-F]{2})))";

}  // namespace tandem::grammar
