// GrammarBuilder's checks and freezing, and Grammar's debug text.
#include "grammar/grammar.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/error.h"
#include "grammar/grammar_limits.h"

namespace tandem::grammar {

uint32_t GrammarBuilder::rule(std::string_view name) {
  auto it = ids_.find(std::string(name));
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  ids_.emplace(std::string(name), id);
  alts_.emplace_back();
  return id;
}

uint32_t GrammarBuilder::fresh_rule(std::string_view base) {
  for (size_t i = names_.size();; ++i) {
    std::string name = fmt::format("{}_{}", base, i);
    if (!ids_.contains(name)) return rule(name);
  }
}

void GrammarBuilder::add_alternative(uint32_t rule, std::vector<GrammarElement> sequence) {
  TANDEM_ASSERT(rule < alts_.size());
  for (const GrammarElement& element : sequence) TANDEM_ASSERT(element.kind != GrammarElement::kEnd);
  alts_[rule].push_back(std::move(sequence));
}

void GrammarBuilder::note_repetition(uint32_t rule, uint64_t copies, GrammarElement item, std::string_view within) {
  TANDEM_ASSERT(rule < alts_.size() && item.kind != GrammarElement::kEnd);
  repetitions_[rule] = {copies, item, std::string(within)};
}

void GrammarBuilder::check_limits() const {
  TANDEM_CHECK_INPUT(names_.size() <= kMaxGrammarRules, "grammar: {} rules after lowering (the limit is {})",
                     names_.size(), kMaxGrammarRules);
  size_t n_elements = 0;
  for (size_t r = 0; r < names_.size(); ++r) {
    TANDEM_CHECK_INPUT(alts_[r].size() <= kMaxRuleAlternatives,
                       "grammar: rule '{}' has {} alternatives (the limit is {})", names_[r], alts_[r].size(),
                       kMaxRuleAlternatives);
    for (const auto& alt : alts_[r]) n_elements += alt.size() + 1;
  }
  TANDEM_CHECK_INPUT(n_elements <= kMaxGrammarElements, "grammar: {} elements after lowering (the limit is {})",
                     n_elements, kMaxGrammarElements);
}

void GrammarBuilder::check_expanded_repetition() const {
  // weight[r]: the optional copies r's nested bounded repetitions expand to (1 without any).
  // A sequence or a choice takes the largest of its parts (they do not nest); a repetition
  // chain multiplies its copies by its item's weight. Depth-first over references, each rule
  // once; a reference back into the current path (recursion) counts 1: unbounded recursion is
  // the matcher's budget's to bound, as any unbounded repetition's.
  constexpr uint64_t kSaturated = uint64_t{1} << 62;
  const size_t n_rules = names_.size();
  std::vector<uint64_t> weight(n_rules, 0);
  std::vector<uint8_t> colour(n_rules, 0);  // 0 new, 1 on the path, 2 done
  struct Frame {
    uint32_t rule;
    size_t alt = 0, element = 0;
    uint64_t best = 1;
  };
  std::vector<Frame> path;
  for (uint32_t start = 0; start < n_rules; ++start) {
    if (colour[start] != 0) continue;
    colour[start] = 1;
    path.push_back({start});
    while (!path.empty()) {
      Frame& f = path.back();
      const auto& alts = alts_[f.rule];
      if (f.alt == alts.size()) {
        uint64_t w = f.best;
        if (auto it = repetitions_.find(f.rule); it != repetitions_.end()) {
          const GrammarElement& item = it->second.item;
          const uint64_t inner = item.kind == GrammarElement::kRule && colour[item.rule] == 2
                                     ? std::max<uint64_t>(weight[item.rule], 1)
                                     : 1;
          w = std::max(w, inner > kSaturated / std::max<uint64_t>(it->second.copies, 1) ? kSaturated
                                                                                        : inner * it->second.copies);
          TANDEM_CHECK_INPUT(w <= kMaxExpandedRepetition,
                             "grammar: repetitions nested in rule '{}' expand to {}{} optional copies (the expanded "
                             "repetition limit is {})",
                             it->second.within, w == kSaturated ? "over " : "", w, kMaxExpandedRepetition);
        }
        weight[f.rule] = w;
        colour[f.rule] = 2;
        path.pop_back();
        continue;
      }
      const auto& alt = alts[f.alt];
      if (f.element == alt.size()) {
        ++f.alt;
        f.element = 0;
        continue;
      }
      const GrammarElement e = alt[f.element];
      if (e.kind == GrammarElement::kRule && colour[e.rule] == 0) {
        colour[e.rule] = 1;
        path.push_back({e.rule});  // `f` is not used past here: the push may move it
        continue;
      }
      if (e.kind == GrammarElement::kRule && colour[e.rule] == 2) f.best = std::max(f.best, weight[e.rule]);
      ++f.element;
    }
  }
}

Grammar GrammarBuilder::build(std::string_view root_name) const {
  auto root_it = ids_.find(std::string(root_name));
  TANDEM_CHECK_INPUT(root_it != ids_.end() && !alts_[root_it->second].empty(), "grammar: no rule '{}'", root_name);
  const size_t n_rules = names_.size();
  for (size_t r = 0; r < n_rules; ++r) {
    TANDEM_CHECK_INPUT(!alts_[r].empty(), "grammar: rule '{}' is used but never defined", names_[r]);
  }
  check_limits();

  // Nullable rules (match the empty string) and productive ones (match some finite string),
  // each by a worklist: an alternative counts the elements it still waits for, and a rule
  // found so lowers the count of every alternative that refers to it. Linear in the size;
  // a pass-until-nothing-changes loop would be quadratic on a long chain of rules.
  std::vector<uint32_t> alt_rule;                        // [n_alts] owner of each alternative
  std::vector<std::vector<uint32_t>> users(n_rules);     // rule -> alternatives referring to it, once per reference
  std::vector<uint32_t> nullable_wait, productive_wait;  // [n_alts]
  for (uint32_t r = 0; r < n_rules; ++r) {
    for (const auto& alt : alts_[r]) {
      const auto a = static_cast<uint32_t>(alt_rule.size());
      alt_rule.push_back(r);
      uint32_t refs = 0;
      bool has_bytes = false;
      for (const GrammarElement& e : alt) {
        if (e.kind == GrammarElement::kRule) {
          ++refs;
          users[e.rule].push_back(a);
        } else {
          has_bytes = true;
        }
      }
      nullable_wait.push_back(has_bytes ? UINT32_MAX : refs);  // a byte is never empty
      productive_wait.push_back(refs);
    }
  }
  const auto fixed_point = [&](std::vector<uint32_t>& wait) {
    std::vector<bool> found(n_rules, false);
    std::vector<uint32_t> work;
    for (size_t a = 0; a < wait.size(); ++a) {
      if (wait[a] == 0 && !found[alt_rule[a]]) {
        found[alt_rule[a]] = true;
        work.push_back(alt_rule[a]);
      }
    }
    while (!work.empty()) {
      const uint32_t r = work.back();
      work.pop_back();
      for (uint32_t a : users[r]) {
        if (wait[a] == UINT32_MAX || --wait[a] != 0 || found[alt_rule[a]]) continue;
        found[alt_rule[a]] = true;
        work.push_back(alt_rule[a]);
      }
    }
    return found;
  };
  const std::vector<bool> nullable = fixed_point(nullable_wait);
  const std::vector<bool> productive = fixed_point(productive_wait);
  for (size_t r = 0; r < n_rules; ++r) {
    TANDEM_CHECK_INPUT(productive[r], "grammar: rule '{}' can never finish (every alternative recurses)", names_[r]);
  }
  // Left recursion: a cycle through references that can be reached without consuming a
  // byte. Depth-first search over those edges, colouring rules (0 new, 1 on the path, 2 done).
  std::vector<std::vector<uint32_t>> left_edges(n_rules);
  for (size_t r = 0; r < n_rules; ++r) {
    for (const auto& alt : alts_[r]) {
      for (const GrammarElement& e : alt) {
        if (e.kind != GrammarElement::kRule) break;
        left_edges[r].push_back(e.rule);
        if (!nullable[e.rule]) break;
      }
    }
  }
  std::vector<uint8_t> colour(n_rules, 0);
  for (uint32_t start = 0; start < n_rules; ++start) {
    if (colour[start] != 0) continue;
    // Iterative DFS: (rule, next edge index).
    std::vector<std::pair<uint32_t, size_t>> path{{start, 0}};
    colour[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == left_edges[r].size()) {
        colour[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t to = left_edges[r][next++];
      TANDEM_CHECK_INPUT(colour[to] != 1,
                         "grammar: rule '{}' is left-recursive (it can reach itself without consuming input)",
                         names_[to]);
      if (colour[to] == 0) {
        colour[to] = 1;
        path.emplace_back(to, 0);
      }
    }
  }
  check_expanded_repetition();

  Grammar g;
  g.names_ = names_;
  g.root_ = root_it->second;
  g.rule_alt_begin_.push_back(0);
  for (size_t r = 0; r < n_rules; ++r) {
    for (const auto& alt : alts_[r]) {
      g.alt_starts_.push_back(static_cast<uint32_t>(g.elements_.size()));
      g.elements_.insert(g.elements_.end(), alt.begin(), alt.end());
      g.elements_.push_back(GrammarElement{});
    }
    g.rule_alt_begin_.push_back(static_cast<uint32_t>(g.alt_starts_.size()));
  }
  return g;
}

std::string Grammar::to_string() const {
  std::string out;
  for (uint32_t r = 0; r < n_rules(); ++r) {
    out += names_[r] + " ::=";
    bool first = true;
    for (uint32_t start : alternatives(r)) {
      if (!first) out += " |";
      first = false;
      for (uint32_t p = start; elements_[p].kind != GrammarElement::kEnd; ++p) {
        const GrammarElement& e = elements_[p];
        if (e.kind == GrammarElement::kRule) {
          out += " " + names_[e.rule];
        } else if (e.lo == e.hi) {
          out += fmt::format(" [\\x{:02X}]", e.lo);
        } else {
          out += fmt::format(" [\\x{:02X}-\\x{:02X}]", e.lo, e.hi);
        }
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace tandem::grammar
