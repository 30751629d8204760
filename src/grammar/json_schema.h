// JSON Schema to grammar: the subset OpenAI's strict structured outputs accept — objects
// (properties in the schema's order, required ones always present, optional ones may be
// left out, no other keys), arrays (items, minItems, maxItems), enum, const, string
// (minLength, maxLength, pattern: regex_grammar.h, formats date-time, date, time, duration,
// email, hostname, ipv4, ipv6, uuid: string_formats.h), number and integer (minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, multipleOf: number_range.h), boolean, null, type lists,
// anyOf, $ref into $defs/definitions (recursion allowed) — plus "any JSON value" and "any JSON
// object" for response_format json_object. Output is GBNF text, compiled by gbnf_parser.h:
// one grammar form, and the text can be printed to see what a schema became.
//
// What the grammar emits is always valid under the schema; it is narrower than a validator
// in known ways: keys appear once each, in schema order; whitespace between tokens is one
// space or one or two newlines and at most `max_whitespace` bytes of indentation (so a model
// cannot loop on it); numbers have at most 16 integer and 16 fraction digits (or a bound's own
// length), and numbers under bounds are written without an exponent; a pattern is matched as
// the regex's grammar writes each character (one JSON spelling of it); enum/const values are
// written compactly as JSON serialises them. Combinations the grammar cannot intersect (a
// pattern or format with minLength/maxLength, a format with a pattern, an integer multipleOf
// with bounds) are refused, as is every keyword outside the subset: an InputError naming it
// (and where it is).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace tandem::grammar {

struct JsonGrammarOptions {
  // Whitespace between two tokens: none, one space, or one or two newlines then at most this
  // many spaces/tabs of indentation (0: no whitespace at all).
  int max_whitespace = 20;
};

// GBNF whose `root` matches optional leading whitespace, then one JSON value valid under
// `schema` (an ordered_json, so that properties keep the schema's order).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options = {});

// GBNF whose `root` matches optional leading whitespace, then any JSON value.
std::string any_json_gbnf(const JsonGrammarOptions& options = {});

// GBNF whose `root` matches optional leading whitespace, then any JSON object (OpenAI's
// response_format json_object: "a valid JSON object", never a bare number or string).
std::string any_json_object_gbnf(const JsonGrammarOptions& options = {});

// The two above, compiled.
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options = {});
Grammar any_json_grammar(const JsonGrammarOptions& options = {});
Grammar any_json_object_grammar(const JsonGrammarOptions& options = {});

}  // namespace tandem::grammar
