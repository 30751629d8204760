// What one grammar may cost, so that one request can neither stall the engine nor exhaust
// the server's memory. Compile limits are checked while a grammar is built (parse_gbnf, and
// through it the JSON Schema front end): past one, the grammar is an InputError that names
// the limit and the value, before any request using it is admitted (the server's 400).
// Matching limits hold while a sequence decodes (stack_pool.h counts them): past one, the
// operation (one mask, one accept) throws InputError, which ends that sequence alone.
// src/grammar/README.md gives the measured cost of each limit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem::grammar {

// GBNF text, as sent or as a JSON Schema compiles to: parsing and lowering are linear in it.
constexpr size_t kMaxGrammarTextBytes = size_t{1} << 20;
// Rules after lowering (each bounded repetition adds one per optional copy).
constexpr size_t kMaxGrammarRules = size_t{1} << 16;
// Elements after lowering (8 bytes each): the compiled grammar's memory.
constexpr size_t kMaxGrammarElements = size_t{1} << 20;
// Alternatives of one rule. Alternatives that start alike are each a parse stack the matcher
// follows at once, so more than kMaxParseStacks of them could never be matched anyway (an
// enum, a guided_choice or an anyOf with 100k options is refused here, not at decode time).
constexpr size_t kMaxRuleAlternatives = 4096;
// One {m,n}'s count, m and n.
constexpr long kMaxRepetitionCount = 10000;
// Expanded repetition count: the optional copies a bounded repetition makes (n - m for
// {m,n}), multiplied through every repetition nested in it, through groups and rule
// references alike. Nested optional copies are what a matcher has to tell apart: in
// ((x{0,100}){0,100}){0,100} one byte can be any of 10^6 places, and the 1.03 million parse
// stacks stalled the engine (issue 33). 2^18 keeps every nesting a JSON Schema asks for in
// practice: 25 strings of up to 10000 characters, or 100 x 100 numbers of 16 digits.
constexpr uint64_t kMaxExpandedRepetition = uint64_t{1} << 18;

// Parse stacks alive at once in one matcher state. Only an ambiguous grammar gets near it.
constexpr size_t kMaxParseStacks = 4096;
// Work one matcher operation (one token mask, one accept) may do expanding parse stacks,
// in units of one stack visited or created (StackPool). Bounds the time one mask takes (~6 ms
// here): masks are made off the engine thread (mask_worker.h), so this is the time a
// grammar's own request may wait for a token, not a delay to the others. See the README.
constexpr uint64_t kMaxStepWork = uint64_t{1} << 21;
// Memory one sequence's matcher may hold: parse stacks, states and the transition cache,
// checked before each allocation. Output under bounded counts makes new stacks as it goes
// (each count is another stack): a 100 x 100 matrix of numbers takes ~900 bytes a byte of
// output, so this is ~70 KB of it; output under unbounded repetition reuses its states.
constexpr size_t kMaxMatcherBytes = size_t{64} << 20;

}  // namespace tandem::grammar
