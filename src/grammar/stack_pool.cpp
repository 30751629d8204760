// StackPool: interning nodes and states, the closure that turns a position into the
// byte-range positions it can read next, and the transition cache.
#include "grammar/stack_pool.h"

#include <algorithm>
#include <atomic>

#include <fmt/format.h>

#include "base/error.h"

namespace tandem::grammar {
namespace {

// Work units (kMaxStepWork), weighted so that a unit costs about the same time whatever the
// work: reading a stack id or a stamp is a unit, a hash-map lookup several, creating a node
// (a map insert and three vector appends) more.
constexpr uint64_t kLookupCost = 4;
constexpr uint64_t kCreateCost = 12;

}  // namespace

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
  if (tops.size() > kMaxTops) too_many_stacks(tops.size());
  initial_ = intern_state(tops, can_end);
  max_work_ = work_;
}

size_t StackPool::bytes() const {
  // An unordered_map entry: its node (key, value, next pointer, cached hash) and a bucket.
  constexpr size_t kMapEntry = 40;
  return nodes_.capacity() * sizeof(Node) + succ_.capacity() * sizeof(Successors) + stamp_.capacity() * 4 +
         node_index_.size() * kMapEntry + succ_data_.capacity() * 4 + states_.capacity() * sizeof(State) +
         state_tops_.capacity() * 4 + state_index_.size() * kMapEntry + row_of_.capacity() * 4 + rows_.capacity() * 4;
}

void StackPool::over_budget() {
  max_work_ = std::max(max_work_, work_);
  throw InputError(fmt::format(
      "grammar: matching one token needed more than {} units of work (the per-step limit): the grammar is too "
      "ambiguous to follow here",
      kMaxStepWork));
}

void StackPool::over_memory(size_t bytes) const {
  throw InputError(fmt::format(
      "grammar: matching this output needs {} MiB of parse stacks and states (the limit is {} MiB per sequence)",
      (bytes + (size_t{1} << 20) - 1) >> 20, kMaxMatcherBytes >> 20));
}

void StackPool::too_many_stacks(size_t n) const {
  throw InputError(fmt::format("grammar: too ambiguous: {}{} parse stacks alive at once (the limit is {})",
                               n > kMaxTops ? "over " : "", kMaxTops, kMaxTops));
}

uint32_t StackPool::intern(uint32_t pos, uint32_t parent) {
  // Room first (a new node needs it; an existing one leaves it for the next).
  grow(nodes_, 1);
  grow(succ_, 1);
  grow(stamp_, 1);
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = node_index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  charge(inserted ? kCreateCost : kLookupCost);
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
  pending_.clear();
  pending_.push_back(start);
  stamp_[start] = generation_;
  const size_t first_top = succ_data_.size();
  const auto& elements = grammar_->elements();
  auto visit = [&](uint32_t n) {
    if (stamp_[n] != generation_) {
      stamp_[n] = generation_;
      pending_.push_back(n);
    }
  };
  while (!pending_.empty()) {
    const uint32_t n = pending_.back();
    pending_.pop_back();
    charge(1);
    const Node node = nodes_[n];
    const GrammarElement e = elements[node.pos];
    if (e.kind == GrammarElement::kBytes) {
      grow(succ_data_, 1);
      succ_data_.push_back(n);
      // Each of these is a stack of the state being built: stop as soon as there are too many.
      if (succ_data_.size() - first_top > kMaxTops) too_many_stacks(succ_data_.size() - first_top);
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
    bool can_end = false;
    try {
      can_end = expand(n);
    } catch (...) {
      succ_data_.resize(begin);  // a closure cut short by a limit is not kept
      throw;
    }
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
  charge(tops.size());
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
    charge(s.end - s.begin);
    for (uint32_t i = s.begin; i < s.end; ++i) {
      const uint32_t top = succ_data_[i];
      if (stamp_[top] != gen) {
        stamp_[top] = gen;
        out.push_back(top);
      }
    }
    if (out.size() > kMaxTops) too_many_stacks(out.size());
  }
}

uint32_t StackPool::intern_state(std::vector<uint32_t>& tops, bool can_end) {
  charge(kLookupCost + 2 * tops.size());  // sort, hash, compare
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
  grow(state_tops_, tops.size());
  grow(states_, 1);
  grow(row_of_, 1);
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
    grow(rows_, 256);
    row_of_[state] = static_cast<int32_t>(rows_.size() / 256);
    rows_.resize(rows_.size() + 256, kUnknown);
    charge(256 / 8);
  }
  rows_[static_cast<size_t>(row_of_[state]) * 256 + byte] = next;
  max_work_ = std::max(max_work_, work_);
  // The vectors are checked as they grow; the hash maps' entries are counted here.
  if (const size_t held = bytes(); held > kMaxMatcherBytes) over_memory(held);
  return next;
}

}  // namespace tandem::grammar
