// StackPool: the parse stacks of a pushdown matcher, interned, and the states built from
// them. A stack is a node id: the node holds the grammar position the parse is at and the
// node to return to when that alternative ends (its parent), so stacks that share a tail
// share nodes. A state is an interned set of stacks (plus whether the root can end there),
// named by a state id; step(state, byte) is cached in a per-state row of 256 transitions, so
// once a state has been seen, matching a byte from it is two array reads — the mask walks
// the whole vocabulary trie and meets the same few states over and over (inside a string,
// every character leads back to the same state). In effect a DFA built lazily from the
// pushdown automaton, over the states that actually occur.
// Not thread-safe: one pool per sequence, shared only by copies of its matcher. Nodes and
// states are never freed while the pool lives (a sequence's output bounds them); the
// transition rows are a cache, dropped when they pass kMaxRows.
// Bounded (grammar_limits.h): the work one operation does building stacks and states (the
// caller opens an operation with begin_operation(): one mask, one accept), the stacks of one
// state, and the memory held; past any, the call throws InputError naming the limit. Cached
// steps cost nothing against the budget. An operation may also be given a stop flag, read
// every kStopCheckUnits units: once it is set (by another thread: the request was cancelled),
// the call throws MaskStopped, so abandoned work ends within microseconds.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_limits.h"

namespace tandem::grammar {

// Thrown by an operation whose stop flag was set (StackPool::begin_operation): the work was
// abandoned, and the pool must not be used again (a throw can leave a half-made node).
struct MaskStopped : std::exception {
  const char* what() const noexcept override { return "grammar: mask computation stopped (request ended)"; }
};

class StackPool {
 public:
  static constexpr int32_t kDead = -1;      // step() result when no stack accepts the byte
  static constexpr size_t kMaxRows = 4096;  // 4 MiB of cached transitions per pool at most
  // Stacks alive at once. Only a highly ambiguous grammar gets near it (`("" | x+){300}`
  // splits a run of x every possible way); past it a step is an InputError, not a stall.
  static constexpr size_t kMaxTops = kMaxParseStacks;

  // Builds the initial state, as one operation: InputError past a limit (a grammar whose
  // start is too ambiguous), so a sequence is refused before it is admitted.
  explicit StackPool(std::shared_ptr<const Grammar> grammar);

  // Between two reads of an operation's stop flag, at most this much work (~10 us).
  static constexpr uint64_t kStopCheckUnits = 4096;

  // Starts a new operation's work budget (kMaxStepWork). `stop`, when given, is read as the
  // work goes on (it must outlive the operation); set, the operation throws MaskStopped.
  void begin_operation(const std::atomic<bool>* stop = nullptr) {
    work_ = 0;
    stop_ = stop;
  }
  // Whether the current operation's stop flag is set (for callers' own loops).
  bool stop_requested() const { return stop_ != nullptr && stop_->load(std::memory_order_relaxed); }

  // The state at the start of the root rule.
  uint32_t initial_state() const { return initial_; }
  // The state after `state` consumes `byte`, or kDead.
  int32_t step(uint32_t state, uint8_t byte) {
    const int32_t row = row_of_[state];
    if (row >= 0) {
      const int32_t next = rows_[static_cast<size_t>(row) * 256 + byte];
      if (next != kUnknown) return next;
    }
    return step_slow(state, byte);
  }
  // The stacks of `state` (each a node at a byte-range element), sorted.
  std::span<const uint32_t> tops(uint32_t state) const {
    return {state_tops_.data() + states_[state].begin, state_tops_.data() + states_[state].end};
  }
  // True when the text that led to `state` is a whole sentence of the grammar.
  bool can_end(uint32_t state) const { return states_[state].can_end; }
  // True when no byte can follow `state` (only the end remains).
  bool finished(uint32_t state) const { return states_[state].begin == states_[state].end; }

  const Grammar& grammar() const { return *grammar_; }
  // Unique over the process's pools, so a cache keyed by state id can tell pools apart.
  uint64_t serial() const { return serial_; }
  size_t n_nodes() const { return nodes_.size(); }
  size_t n_states() const { return states_.size(); }
  // Transitions computed rather than read from the cache (a measure of cache misses).
  size_t n_slow_steps() const { return n_slow_steps_; }
  // Work done in the current operation (units of kMaxStepWork), and the most any one
  // operation has done.
  uint64_t work() const { return work_; }
  uint64_t max_work() const { return max_work_; }
  // Bytes held for nodes, closures, states and the transition cache (kMaxMatcherBytes).
  size_t bytes() const;

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFF;
  static constexpr int32_t kUnknown = -2;
  struct Node {
    uint32_t pos;     // index into grammar elements
    uint32_t parent;  // node to continue at when this alternative ends; kNone: the root's end
    uint8_t lo, hi;   // the byte range at pos when it is one (a top), else lo > hi
    uint32_t next;    // a top's node once it has consumed its byte: (pos + 1, parent); kNone until needed
  };
  // The tops a node expands to (its closure): [begin, end) of succ_data_.
  struct Successors {
    uint32_t begin = 0, end = 0;
    bool known = false, can_end = false;
  };
  struct State {
    uint32_t begin, end;  // into state_tops_
    bool can_end;
  };

  uint32_t intern(uint32_t pos, uint32_t parent);
  // The tops reachable from `node` without consuming a byte (following references into
  // rules and returns out of finished alternatives), appended to succ_data_; true when the
  // root can end there.
  bool expand(uint32_t node);
  // The closure of node `n`, computed once. Many tops share their next node (every
  // alternative of a character class returns to the same place), so closures are cached
  // per next node rather than per top.
  const Successors& closure(uint32_t n);
  // The stacks after `tops` consume `byte`, without duplicates, into `out` (cleared first).
  void advance(std::span<const uint32_t> tops, uint8_t byte, std::vector<uint32_t>& out, bool& can_end);
  // The id of the state with these tops (sorted here) and can_end, interned.
  uint32_t intern_state(std::vector<uint32_t>& tops, bool can_end);
  int32_t step_slow(uint32_t state, uint8_t byte);
  // Counts `units` of work against the operation's budget; throws past it.
  void charge(uint64_t units) {
    const uint64_t before = work_;
    work_ += units;
    if (work_ > kMaxStepWork) over_budget();
    if ((before / kStopCheckUnits) != (work_ / kStopCheckUnits) && stop_requested()) throw MaskStopped();
  }
  [[noreturn]] void over_budget();
  [[noreturn]] void too_many_stacks(size_t n) const;
  [[noreturn]] void over_memory(size_t bytes) const;
  // Room for `more` elements in `v`, grown as a vector grows (doubling), unless that would
  // take the pool past kMaxMatcherBytes: then InputError, before anything is allocated.
  template <typename T>
  void grow(std::vector<T>& v, size_t more) {
    if (v.size() + more <= v.capacity()) return;
    const size_t capacity = std::max(v.size() + more, 2 * v.capacity());
    const size_t after = bytes() + (capacity - v.capacity()) * sizeof(T);
    if (after > kMaxMatcherBytes) over_memory(after);
    v.reserve(capacity);
  }

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_index_;  // (pos << 32 | parent) -> node id
  std::vector<Successors> succ_;                       // [n_nodes] closure of each node
  std::vector<uint32_t> succ_data_;
  // Duplicate detection: node n is in the set being built when stamp_[n] == generation_.
  std::vector<uint32_t> stamp_;  // [n_nodes]
  uint32_t generation_ = 0;
  std::vector<uint32_t> pending_, scratch_, nexts_;  // expand()'s worklist, step_slow()'s set, advance()'s next nodes

  std::vector<State> states_;
  std::vector<uint32_t> state_tops_;
  std::unordered_multimap<uint64_t, uint32_t> state_index_;  // hash of (tops, can_end) -> state
  std::vector<int32_t> row_of_;                              // [n_states] row in rows_, or -1
  std::vector<int32_t> rows_;                                // [n_rows, 256] next state, kDead or kUnknown
  uint32_t initial_ = 0;
  size_t n_slow_steps_ = 0;
  uint64_t work_ = 0, max_work_ = 0;
  const std::atomic<bool>* stop_ = nullptr;  // the current operation's stop flag, if any
  uint64_t serial_;
};

}  // namespace tandem::grammar
