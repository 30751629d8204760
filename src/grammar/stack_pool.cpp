// StackPool: interning, the closure that turns a position into the byte-range positions it
// can read next, and advancing a set of stacks by one byte.
#include "grammar/stack_pool.h"

#include "base/error.h"

namespace tandem::grammar {

StackPool::StackPool(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  TANDEM_ASSERT(grammar_ != nullptr);
}

uint32_t StackPool::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    const GrammarElement& e = grammar_->elements()[pos];
    const bool top = e.kind == GrammarElement::kBytes;
    nodes_.push_back({pos, parent, top ? e.lo : uint8_t{1}, top ? e.hi : uint8_t{0}});
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
      const uint32_t cont = intern(node.pos + 1, node.parent);
      for (uint32_t alt : grammar_->alternatives(e.rule)) visit(intern(alt, cont));
    }
  }
  return can_end;
}

const StackPool::Successors& StackPool::successors(uint32_t top) {
  if (!succ_[top].known) {
    const Node node = nodes_[top];
    const uint32_t next = intern(node.pos + 1, node.parent);
    const auto begin = static_cast<uint32_t>(succ_data_.size());
    const bool can_end = expand(next);
    succ_[top] = {begin, static_cast<uint32_t>(succ_data_.size()), true, can_end};
  }
  return succ_[top];
}

void StackPool::initial(std::vector<uint32_t>& tops, bool& can_end) {
  tops.clear();
  can_end = false;
  for (uint32_t alt : grammar_->alternatives(grammar_->root())) {
    const uint32_t n = intern(alt, kNone);
    const auto begin = succ_data_.size();
    can_end = expand(n) || can_end;
    for (size_t i = begin; i < succ_data_.size(); ++i) tops.push_back(succ_data_[i]);
    succ_data_.resize(begin);
  }
  // Deduplicate across alternatives (expand() moved the generation on).
  ++generation_;
  size_t kept = 0;
  for (uint32_t t : tops) {
    if (stamp_[t] != generation_) {
      stamp_[t] = generation_;
      tops[kept++] = t;
    }
  }
  tops.resize(kept);
}

void StackPool::advance(std::span<const uint32_t> tops, uint8_t byte, std::vector<uint32_t>& out, bool& can_end) {
  can_end = false;
  // Make sure every matching top's successors are cached first: computing them grows the
  // pool and moves the generation, which must not happen while `out` is being deduplicated.
  for (uint32_t t : tops) {
    if (nodes_[t].lo <= byte && byte <= nodes_[t].hi && !succ_[t].known) successors(t);
  }
  const uint32_t gen = ++generation_;
  for (uint32_t t : tops) {
    const Node& node = nodes_[t];
    if (byte < node.lo || byte > node.hi) continue;
    const Successors& s = succ_[t];
    can_end = can_end || s.can_end;
    for (uint32_t i = s.begin; i < s.end; ++i) {
      const uint32_t n = succ_data_[i];
      if (stamp_[n] != gen) {
        stamp_[n] = gen;
        out.push_back(n);
      }
    }
  }
}

}  // namespace tandem::grammar
