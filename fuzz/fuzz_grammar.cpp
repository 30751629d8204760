// libFuzzer target for the grammar engine's front ends and matcher: any GBNF text (or, when
// the input starts with '{', a JSON Schema; with '/', a regex as guided_regex takes it) must
// compile or throw InputError; a compiled
// grammar then runs over the input's own bytes (accept, can_end, rollback) and through a
// token masker over a small vocabulary cut from the input, without crashes, sanitizer
// reports or runaway memory. The limits of grammar_limits.h are checked as invariants: a
// grammar that compiles is within the compile limits, and no matcher operation does more
// than the per-step work or holds more than the memory limit (each aborts when broken).
// Seeds live in fuzz/seeds/fuzz_grammar/ (the nested-repetition and ambiguity bombs of
// issue 33 among them).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_limits.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex_grammar.h"
#include "grammar/token_mask.h"
#include "grammar/token_trie.h"

namespace {

using namespace tandem::grammar;

// What one operation may overshoot its budget by: the unit that crosses it (a state's scan
// of at most kMaxParseStacks stacks, a row of the cache).
constexpr uint64_t kWorkSlack = 8 * kMaxParseStacks + 256;

void check(bool ok) {
  if (!ok) std::abort();
}

void check_compiled(const Grammar& g) {
  check(g.n_rules() <= kMaxGrammarRules);
  check(g.elements().size() <= kMaxGrammarElements);
  for (uint32_t r = 0; r < g.n_rules(); ++r) check(g.alternatives(r).size() <= kMaxRuleAlternatives);
}

void check_pool(const StackPool& pool) {
  check(pool.max_work() <= kMaxStepWork + kWorkSlack);
  check(pool.bytes() <= kMaxMatcherBytes + (size_t{8} << 20));
}

// Tokens: every single byte the input has, then its 2- and 3-byte windows; id 0 ends.
std::shared_ptr<const TokenTrie> vocabulary(const std::string& text) {
  std::vector<std::string> pieces = {""};
  for (size_t i = 0; i < text.size() && pieces.size() < 256; ++i) {
    pieces.push_back(text.substr(i, 1));
    if (i + 2 <= text.size()) pieces.push_back(text.substr(i, 2));
    if (i + 3 <= text.size()) pieces.push_back(text.substr(i, 3));
  }
  return std::make_shared<const TokenTrie>(std::move(pieces));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 14) return 0;  // long inputs add nothing but time
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::shared_ptr<const Grammar> grammar;
  try {
    if (!text.empty() && text[0] == '{') {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return 0;
      grammar = std::make_shared<const Grammar>(json_schema_grammar(schema));
    } else if (!text.empty() && text[0] == '/') {
      grammar = std::make_shared<const Grammar>(parse_gbnf("root ::= " + regex_to_gbnf(text.substr(1), {}, "regex")));
    } else {
      grammar = std::make_shared<const Grammar>(parse_gbnf(text));
    }
  } catch (const tandem::InputError&) {
    return 0;
  }
  check_compiled(*grammar);
  std::optional<GrammarMatcher> matcher;
  try {
    matcher.emplace(grammar, 4);
    for (size_t i = 0; i < text.size() && i < 256; ++i) {
      if (!matcher->accept_byte(static_cast<uint8_t>(text[i])) && i % 3 == 0) matcher->rollback(1);
    }
    (void)matcher->can_end();
  } catch (const tandem::InputError&) {
  }
  if (matcher) check_pool(matcher->pool());
  // A few decode steps as the engine takes them: mask, then the first allowed token.
  const auto trie = vocabulary(text);
  TokenMasker masker(trie, {0});
  std::vector<uint32_t> mask(mask_words(trie->vocab_size()));
  matcher.reset();
  try {
    matcher.emplace(grammar);
    for (int step = 0; step < 8 && masker.fill_mask(*matcher, mask); ++step) {
      int32_t id = 1;
      while (id < trie->vocab_size() && !mask_allows(mask, id)) ++id;
      if (id == trie->vocab_size() || !masker.accept_token(*matcher, id)) break;
    }
  } catch (const tandem::InputError&) {
  }
  if (matcher) check_pool(matcher->pool());
  return 0;
}
