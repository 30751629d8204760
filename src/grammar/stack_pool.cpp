// StackPool: interning nodes and states, the closure that turns a position into the
// byte-range positions it can read next, and the transition cache.
#include "grammar/stack_pool.h"

#include <algorithm>
#include <atomic>

#include "base/error.h"

namespace tandem::grammar {

StackPool::StackPool(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  static std::atomic<uint64_t> next_serial{1};
  serial_ = next_serial.fetch_add(1, std::memory_order_relaxed);
  TANDEM_ASSERT(grammar_ != nullptr);
  std::vector<uint32_t> tops;
  bool can_end = false;
  for (uint32_t alt : grammar_->alternatives(grammar_->root())) {
    const uint32_t n = intern(alt, kNone);
    const auto begin = succ_data_.size();
    can_end = expand(n) || can_end;
    tops.insert(tops.end(), succ_data_.begin() + static_cast<std::ptrdiff_t>(begin), succ_data_.end());
    succ_data_.resize(begin);
  }
  std::sort(tops.begin(), tops.end());
  tops.erase(std::unique(tops.begin(), tops.end()), tops.end());
  initial_ = intern_state(tops, can_end);
}

uint32_t StackPool::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = node_index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    const GrammarElement& e = grammar_->elements()[pos];
    const bool top = e.kind == GrammarElement::kBytes;
    nodes_.push_back({pos, parent, top ? e.lo : uint8_t{1}, top ? e.hi : uint8_t{0}, kNone});
    succ_.emplace_back();
    stamp_.push_back(0);
  }
  return it->second;
}

bool StackPool::expand(uint32_t start) {
  // A worklist instead of recursion: a deep stack of finished alternatives pops one level
  // per step. Left recursion is refused when the grammar is built, so pushes terminate;
  // nodes are interned, so the stamp stops revisits.
  ++generation_;
  bool can_end = false;
  work_.clear();
  work_.push_back(start);
  stamp_[start] = generation_;
  const auto& elements = grammar_->elements();
  auto visit = [&](uint32_t n) {
    if (stamp_[n] != generation_) {
      stamp_[n] = generation_;
      work_.push_back(n);
    }
  };
  while (!work_.empty()) {
    const uint32_t n = work_.back();
    work_.pop_back();
    const Node node = nodes_[n];
    const GrammarElement e = elements[node.pos];
    if (e.kind == GrammarElement::kBytes) {
      succ_data_.push_back(n);
    } else if (e.kind == GrammarElement::kEnd) {
      if (node.parent == kNone) {
        can_end = true;
      } else {
        visit(node.parent);
      }
    } else {
      // A reference in tail position returns straight to the parent: without this, every
      // round of a right-recursive repetition (x* is `r ::= x r | ""`) would add a stack
      // level, so no two string characters would ever lead to the same state.
      const bool tail = elements[node.pos + 1].kind == GrammarElement::kEnd;
      const uint32_t cont = tail ? node.parent : intern(node.pos + 1, node.parent);
      for (uint32_t alt : grammar_->alternatives(e.rule)) visit(intern(alt, cont));
    }
  }
  return can_end;
}

const StackPool::Successors& StackPool::closure(uint32_t n) {
  if (!succ_[n].known) {
    const auto begin = static_cast<uint32_t>(succ_data_.size());
    const bool can_end = expand(n);
    succ_[n] = {begin, static_cast<uint32_t>(succ_data_.size()), true, can_end};
  }
  return succ_[n];
}

void StackPool::advance(std::span<const uint32_t> tops, uint8_t byte, std::vector<uint32_t>& out, bool& can_end) {
  out.clear();
  can_end = false;
  // The distinct nodes the matching tops move to, with their closures computed first:
  // computing one grows the pool and moves the generation, which must not happen while
  // `out` is being deduplicated.
  nexts_.clear();
  for (uint32_t t : tops) {
    if (byte < nodes_[t].lo || byte > nodes_[t].hi) continue;
    if (nodes_[t].next == kNone) {
      const uint32_t next = intern(nodes_[t].pos + 1, nodes_[t].parent);
      nodes_[t].next = next;
    }
    nexts_.push_back(nodes_[t].next);
  }
  std::sort(nexts_.begin(), nexts_.end());
  nexts_.erase(std::unique(nexts_.begin(), nexts_.end()), nexts_.end());
  for (uint32_t n : nexts_) closure(n);
  const uint32_t gen = ++generation_;
  for (uint32_t n : nexts_) {
    const Successors& s = succ_[n];
    can_end = can_end || s.can_end;
    for (uint32_t i = s.begin; i < s.end; ++i) {
      const uint32_t top = succ_data_[i];
      if (stamp_[top] != gen) {
        stamp_[top] = gen;
        out.push_back(top);
      }
    }
  }
  TANDEM_CHECK_INPUT(out.size() <= kMaxTops, "grammar: too ambiguous (over {} parse stacks alive at once)", kMaxTops);
}

uint32_t StackPool::intern_state(std::vector<uint32_t>& tops, bool can_end) {
  std::sort(tops.begin(), tops.end());
  uint64_t hash = can_end ? 0x9E3779B97F4A7C15ull : 0x2545F4914F6CDD1Dull;
  for (uint32_t t : tops) hash = (hash ^ t) * 0x100000001B3ull;
  auto [first, last] = state_index_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const State& s = states_[it->second];
    if (s.can_end == can_end &&
        std::equal(tops.begin(), tops.end(), state_tops_.begin() + s.begin, state_tops_.begin() + s.end)) {
      return it->second;
    }
  }
  const auto id = static_cast<uint32_t>(states_.size());
  const auto begin = static_cast<uint32_t>(state_tops_.size());
  state_tops_.insert(state_tops_.end(), tops.begin(), tops.end());
  states_.push_back({begin, static_cast<uint32_t>(state_tops_.size()), can_end});
  row_of_.push_back(-1);
  state_index_.emplace(hash, id);
  return id;
}

int32_t StackPool::step_slow(uint32_t state, uint8_t byte) {
  ++n_slow_steps_;
  bool can_end = false;
  advance(tops(state), byte, scratch_, can_end);
  const int32_t next = scratch_.empty() && !can_end ? kDead : static_cast<int32_t>(intern_state(scratch_, can_end));
  if (row_of_[state] < 0) {
    if (rows_.size() / 256 >= kMaxRows) {
      // The cache is full: start it again (states and nodes stay valid).
      rows_.clear();
      std::fill(row_of_.begin(), row_of_.end(), -1);
    }
    row_of_[state] = static_cast<int32_t>(rows_.size() / 256);
    rows_.resize(rows_.size() + 256, kUnknown);
  }
  rows_[static_cast<size_t>(row_of_[state]) * 256 + byte] = next;
  return next;
}

}  // namespace tandem::grammar
