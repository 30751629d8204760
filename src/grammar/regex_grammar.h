// Regular expressions (ECMAScript syntax, as JSON Schema's `pattern` and vLLM's guided_regex
// use it) to a GBNF expression: literals and escapes, classes ([a-z], [^...], \d \w \s and
// their negations, .), groups ((...), (?:...), (?<name>...)), alternation, repeats (* + ?
// {n} {n,} {n,m}, lazy forms alike), and ^ / $ at the ends of the pattern or of its top-level
// alternatives. What is not regular or cannot be written as a grammar is an InputError naming
// the construct: backreferences, lookahead and lookbehind, word boundaries, \p{...} classes,
// inline flags, anchors inside a group.
//
// Limits are checked while parsing, before any grammar is built: the pattern's length, group
// nesting, one repeat's count (kMaxRepetitionCount), and the expanded repetition and element
// counts a nesting of repeats multiplies to (kMaxExpandedRepetition, kMaxGrammarElements) —
// each named in the error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tandem::grammar {

// Pattern text longer than this is refused.
constexpr size_t kMaxRegexBytes = 16384;

struct RegexGrammarOptions {
  // Emit each character as the content of a JSON string writes it ('"' as \", a newline as
  // \n, other control characters as \u00XX), for a `pattern` inside "...".
  bool json_string = false;
  // JSON Schema semantics: a pattern matches anywhere in the string, so a side without its
  // anchor (^ or $) may have any characters before / after the match. Otherwise (guided_regex)
  // the whole output must match and ^ / $ at the ends change nothing.
  bool search = false;
};

// The lengths, in characters, of the strings a pattern matches (max: nullopt when unbounded).
struct RegexLengths {
  uint64_t min = 0;
  std::optional<uint64_t> max;
};

// A GBNF expression (no rules of its own) matching what `pattern` matches; `what` names the
// field in errors ("pattern at #/properties/x", "guided_regex"). `lengths`, when given, gets
// the matched strings' lengths (to tell whether minLength/maxLength beside it hold anyway).
std::string regex_to_gbnf(std::string_view pattern, const RegexGrammarOptions& options, const std::string& what,
                          RegexLengths* lengths = nullptr);

}  // namespace tandem::grammar
