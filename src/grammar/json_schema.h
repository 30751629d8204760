// JSON Schema to grammar: the subset OpenAI's strict structured outputs accept — objects
// (properties in the schema's order, required ones always present, optional ones may be
// left out, no other keys), arrays (items, minItems, maxItems), enum, const, string
// (minLength, maxLength, formats date, time, date-time, uuid), number, integer, boolean,
// null, type lists, anyOf, $ref into $defs/definitions (recursion allowed) — plus "any JSON
// value" for response_format json_object. Output is GBNF text, compiled by gbnf_parser.h:
// one grammar form, and the text can be printed to see what a schema became.
//
// What the grammar emits is always valid under the schema; it is narrower than a validator
// in known ways: keys appear once each, in schema order; whitespace between tokens is at most
// `max_whitespace` bytes (so a model cannot loop on it); numbers have at most 16 integer and
// 16 fraction digits; enum/const values are written compactly as JSON serialises them.
// A keyword outside the subset is an InputError naming it (and where it is).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace tandem::grammar {

struct JsonGrammarOptions {
  int max_whitespace = 20;  // bytes of [ \t\n\r] allowed between two tokens
};

// GBNF whose `root` matches optional leading whitespace, then one JSON value valid under
// `schema` (an ordered_json, so that properties keep the schema's order).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options = {});

// GBNF whose `root` matches optional leading whitespace, then any JSON value.
std::string any_json_gbnf(const JsonGrammarOptions& options = {});

// The two above, compiled.
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options = {});
Grammar any_json_grammar(const JsonGrammarOptions& options = {});

}  // namespace tandem::grammar
