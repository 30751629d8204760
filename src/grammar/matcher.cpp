// GrammarMatcher: the state of one sequence and its bounded undo history.
#include "grammar/matcher.h"

#include "base/error.h"

namespace tandem::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, size_t max_rollback)
    : pool_(std::make_shared<StackPool>(std::move(grammar))),
      max_rollback_(max_rollback),
      state_(pool_->initial_state()) {}

void GrammarMatcher::reset() {
  state_ = pool_->initial_state();
  history_.clear();
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  pool_->begin_operation();
  uint32_t state = state_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    // A finished state has no stacks: a byte after it is dead like any rejected one.
    const int32_t next = pool_->step(state, static_cast<uint8_t>(bytes[i]));
    if (next == StackPool::kDead) return false;
    state = static_cast<uint32_t>(next);
  }
  if (max_rollback_ > 0) {
    if (history_.size() >= 2 * max_rollback_) {
      // Drop the oldest half at once: O(1) per step amortised.
      history_.erase(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(max_rollback_));
    }
    history_.push_back(state_);
  }
  state_ = state;
  return true;
}

bool GrammarMatcher::rollback(size_t n_steps) {
  if (n_steps == 0) return true;
  if (n_steps > history_.size()) return false;
  state_ = history_[history_.size() - n_steps];
  history_.resize(history_.size() - n_steps);
  return true;
}

}  // namespace tandem::grammar
