// GrammarBuilder's checks and freezing, and Grammar's debug text.
#include "grammar/grammar.h"

#include <fmt/format.h>

#include "base/error.h"

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

Grammar GrammarBuilder::build(std::string_view root_name) const {
  auto root_it = ids_.find(std::string(root_name));
  TANDEM_CHECK_INPUT(root_it != ids_.end() && !alts_[root_it->second].empty(), "grammar: no rule '{}'", root_name);
  const size_t n_rules = names_.size();
  for (size_t r = 0; r < n_rules; ++r) {
    TANDEM_CHECK_INPUT(!alts_[r].empty(), "grammar: rule '{}' is used but never defined", names_[r]);
  }

  // Nullable rules (match the empty string), to a fixed point.
  std::vector<bool> nullable(n_rules, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n_rules; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : alts_[r]) {
        bool all = true;
        for (const GrammarElement& e : alt) all = all && e.kind == GrammarElement::kRule && nullable[e.rule];
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  // Productive rules (match some finite string), to a fixed point.
  std::vector<bool> productive(n_rules, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n_rules; ++r) {
      if (productive[r]) continue;
      for (const auto& alt : alts_[r]) {
        bool all = true;
        for (const GrammarElement& e : alt) all = all && (e.kind != GrammarElement::kRule || productive[e.rule]);
        if (all) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
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
