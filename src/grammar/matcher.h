// GrammarMatcher: where one sequence's output stands in its grammar — a StackPool state, the
// set of parse stacks after the bytes accepted so far — with one-step accept, an end-of-text
// test and rollback by whole steps (a step is one accept call: one token, for speculative
// decoding's rejected drafts). It holds no vocabulary; token masks are token_mask.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/stack_pool.h"

namespace tandem::grammar {

class GrammarMatcher {
 public:
  // At the start of `grammar`'s root rule. `max_rollback`: how many steps rollback() can undo
  // at least (older history is dropped, so memory stays bounded over a long generation).
  // InputError when the start is already past a matching limit (grammar_limits.h).
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar, size_t max_rollback = 64);

  // Copies are cheap (a state id and the history's ids) and independent in what they
  // accept, but share the stack pool: use a matcher and its copies from one thread.
  GrammarMatcher(const GrammarMatcher&) = default;
  GrammarMatcher& operator=(const GrammarMatcher&) = default;

  // Consumes all of `bytes` as one step and returns true, or returns false and changes
  // nothing when some prefix of them leaves no stack alive. Empty bytes: a step that
  // changes nothing. InputError (matcher unchanged) only past a matching limit
  // (grammar_limits.h: stacks at once, work per call, memory): a grammar too ambiguous to follow.
  bool accept_bytes(std::string_view bytes);
  bool accept_byte(uint8_t byte) { return accept_bytes(std::string_view(reinterpret_cast<const char*>(&byte), 1)); }

  // True when the text so far is a whole sentence of the grammar (EOS may come now).
  bool can_end() const { return pool_->can_end(state_); }
  // True when no byte can follow (the grammar is finished: only EOS remains).
  bool must_end() const { return pool_->finished(state_); }

  // Undoes the last `n_steps` accept calls; false (and nothing undone) when fewer than that
  // are remembered.
  bool rollback(size_t n_steps);
  size_t n_steps_remembered() const { return history_.size(); }
  // Back to the start of the grammar, history cleared (the pool's caches stay).
  void reset();

  // The current state in pool(); for the token masker.
  uint32_t state() const { return state_; }
  StackPool& pool() { return *pool_; }

 private:
  std::shared_ptr<StackPool> pool_;
  size_t max_rollback_;
  uint32_t state_;
  std::vector<uint32_t> history_;  // state before each remembered step, oldest first
};

}  // namespace tandem::grammar
