// Grammar: the one form every constraint compiles to (GBNF text, JSON Schema, any-JSON). A
// context-free grammar over bytes: rules are alternatives of sequences whose elements are
// byte ranges or references to rules. Code points, repetition and groups are gone by now:
// the front ends lower them (utf8_ranges.h, gbnf_parser.h). Immutable once built, so one
// Grammar serves every sequence that decodes under it. Matching is matcher.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::grammar {

struct GrammarElement {
  enum Kind : uint8_t {
    kBytes,  // one byte in [lo, hi]
    kRule,   // a reference to rule `rule`
    kEnd,    // the end of an alternative
  };
  Kind kind = kEnd;
  uint8_t lo = 0, hi = 0;
  uint32_t rule = 0;

  static GrammarElement bytes(uint8_t lo, uint8_t hi) { return {kBytes, lo, hi, 0}; }
  static GrammarElement byte(uint8_t b) { return {kBytes, b, b, 0}; }
  static GrammarElement ref(uint32_t rule) { return {kRule, 0, 0, rule}; }
};

class Grammar {
 public:
  // Every alternative of every rule, each followed by one kEnd: a position in the grammar is
  // an index into this array, which is what the matcher's stacks hold.
  const std::vector<GrammarElement>& elements() const { return elements_; }
  // Start positions (into elements()) of rule `rule`'s alternatives; at least one.
  std::span<const uint32_t> alternatives(uint32_t rule) const {
    return {alt_starts_.data() + rule_alt_begin_[rule], alt_starts_.data() + rule_alt_begin_[rule + 1]};
  }
  uint32_t root() const { return root_; }
  uint32_t n_rules() const { return static_cast<uint32_t>(names_.size()); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  // GBNF-like text of the lowered form (byte ranges as [\xNN-\xNN]), for debugging and tests.
  std::string to_string() const;

 private:
  friend class GrammarBuilder;
  std::vector<GrammarElement> elements_;
  std::vector<uint32_t> alt_starts_;      // [n_alternatives] grouped by rule
  std::vector<uint32_t> rule_alt_begin_;  // [n_rules + 1] rule r owns alt_starts_[begin[r], begin[r+1])
  std::vector<std::string> names_;        // [n_rules]
  uint32_t root_ = 0;
};

// Collects rules by name, then checks and freezes them into a Grammar. Front ends declare a
// rule when they first see its name (a reference may come before the definition).
// build() is linear in the grammar's size, and holds it to grammar_limits.h.
class GrammarBuilder {
 public:
  // The id of rule `name`, declared (without alternatives) if new.
  uint32_t rule(std::string_view name);
  // A new rule named after `base` that no other rule has (helper rules for groups and
  // repetition: "value_3").
  uint32_t fresh_rule(std::string_view base);
  bool has_alternatives(uint32_t rule) const { return !alts_[rule].empty(); }
  size_t n_rules() const { return names_.size(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }
  void add_alternative(uint32_t rule, std::vector<GrammarElement> sequence);
  // Says that `rule` is a bounded repetition's chain of `copies` optional copies of `item`
  // (x{m,n}: n - m), written in the front end's rule `within`: build() multiplies copies
  // through nesting for the expanded repetition limit.
  void note_repetition(uint32_t rule, uint64_t copies, GrammarElement item, std::string_view within);

  // Throws InputError when `root_name` is undefined, a referenced rule has no alternatives,
  // a rule is left-recursive (the matcher's expansion would not terminate), a rule can
  // never finish (no finite string matches it: every stack through it would be a dead end,
  // and a mask must not offer tokens that lead there), or a limit of grammar_limits.h is
  // passed (rules, alternatives of a rule, elements, expanded repetition count).
  Grammar build(std::string_view root_name) const;

 private:
  struct Repetition {
    uint64_t copies;
    GrammarElement item;
    std::string within;
  };
  void check_limits() const;
  // Over every rule, the optional copies its nested bounded repetitions expand to; throws
  // past kMaxExpandedRepetition.
  void check_expanded_repetition() const;

  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::vector<std::vector<GrammarElement>>> alts_;  // [n_rules][n_alts][n_elements]
  std::unordered_map<uint32_t, Repetition> repetitions_;        // chain rule -> what it repeats
};

}  // namespace tandem::grammar
