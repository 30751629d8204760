// StackPool: the parse stacks of a pushdown matcher, interned as a tree of nodes, and the
// one operation matching needs: advance a set of stacks by a byte. A stack is a node id: the
// node holds the grammar position the parse is at and the node to return to when that
// alternative ends (its parent), so stacks that share a tail share its nodes and a set of
// stacks is a short vector of ids. Each node's successors after it consumes a byte are
// computed once and cached, so the hot path (token masks walk the vocabulary trie) is array
// reads with no hashing. Not thread-safe: one pool per sequence, shared only by copies of
// that sequence's matcher.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace tandem::grammar {

class StackPool {
 public:
  explicit StackPool(std::shared_ptr<const Grammar> grammar);

  // The stacks at the start of the root rule; `can_end` when the root matches "".
  void initial(std::vector<uint32_t>& tops, bool& can_end);

  // The stacks after `tops` consume `byte`, appended to `out` without duplicates (out must
  // start empty); `can_end` set when one of them has finished the root rule. Every id in
  // `tops` and `out` is a node at a byte-range element ("a top").
  void advance(std::span<const uint32_t> tops, uint8_t byte, std::vector<uint32_t>& out, bool& can_end);

  // Whether any of `tops` accepts `byte` (no successors computed).
  bool accepts(std::span<const uint32_t> tops, uint8_t byte) const {
    for (uint32_t t : tops)
      if (nodes_[t].lo <= byte && byte <= nodes_[t].hi) return true;
    return false;
  }

  const Grammar& grammar() const { return *grammar_; }
  size_t n_nodes() const { return nodes_.size(); }

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFF;
  struct Node {
    uint32_t pos;     // index into grammar elements
    uint32_t parent;  // node to continue at when this alternative ends; kNone: the root's end
    uint8_t lo, hi;   // the byte range at pos when it is one (a top), else lo > hi
  };
  // Successors of a top after it consumes a byte in its range: [begin, end) of succ_data_.
  struct Successors {
    uint32_t begin = 0, end = 0;
    bool known = false, can_end = false;
  };

  uint32_t intern(uint32_t pos, uint32_t parent);
  // The tops reachable from `node` without consuming a byte (following references into
  // rules and returns out of finished alternatives), appended to succ_data_; true when the
  // root can end there.
  bool expand(uint32_t node);
  const Successors& successors(uint32_t top);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> index_;  // (pos << 32 | parent) -> node id
  std::vector<Successors> succ_;                  // [n_nodes]
  std::vector<uint32_t> succ_data_;
  // Duplicate detection: node n is in the set being built when stamp_[n] == generation_.
  std::vector<uint32_t> stamp_;  // [n_nodes]
  uint32_t generation_ = 0;
  std::vector<uint32_t> work_;  // expand()'s worklist
};

}  // namespace tandem::grammar
