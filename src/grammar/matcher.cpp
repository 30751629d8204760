// GrammarMatcher: the state of one sequence and its bounded undo history.
#include "grammar/matcher.h"

#include "base/error.h"

namespace tandem::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, size_t max_rollback)
    : pool_(std::make_shared<StackPool>(std::move(grammar))), max_rollback_(max_rollback) {
  pool_->initial(tops_, can_end_);
}

void GrammarMatcher::reset() {
  pool_->initial(tops_, can_end_);
  history_tops_.clear();
  history_marks_.clear();
}

void GrammarMatcher::remember() {
  if (max_rollback_ == 0) return;
  if (history_marks_.size() >= 2 * max_rollback_) {
    // Drop the oldest half at once, so trimming costs O(1) per step amortised.
    const size_t drop = history_marks_.size() - max_rollback_ + 1;
    const size_t offset = history_marks_[drop].begin;
    history_tops_.erase(history_tops_.begin(), history_tops_.begin() + static_cast<std::ptrdiff_t>(offset));
    history_marks_.erase(history_marks_.begin(), history_marks_.begin() + static_cast<std::ptrdiff_t>(drop));
    for (Mark& m : history_marks_) m.begin -= offset;
  }
  history_marks_.push_back({history_tops_.size(), can_end_});
  history_tops_.insert(history_tops_.end(), tops_.begin(), tops_.end());
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (bytes.empty()) {
    remember();
    return true;
  }
  // The first byte reads tops_ in place; later ones swap between next_ and current_.
  std::vector<uint32_t>& current = current_;
  bool can_end = can_end_;
  std::span<const uint32_t> from = tops_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    next_.clear();
    pool_->advance(from, static_cast<uint8_t>(bytes[i]), next_, can_end);
    if (next_.empty() && !can_end) return false;
    if (next_.empty() && i + 1 < bytes.size()) return false;
    current.swap(next_);
    from = current;
  }
  remember();
  tops_.assign(current.begin(), current.end());
  can_end_ = can_end;
  return true;
}

bool GrammarMatcher::rollback(size_t n_steps) {
  if (n_steps == 0) return true;
  if (n_steps > history_marks_.size()) return false;
  const size_t i = history_marks_.size() - n_steps;
  const Mark mark = history_marks_[i];
  tops_.assign(history_tops_.begin() + static_cast<std::ptrdiff_t>(mark.begin), history_tops_.end());
  // The state before step i is the segment up to step i+1's start.
  if (i + 1 < history_marks_.size()) {
    tops_.resize(history_marks_[i + 1].begin - mark.begin);
  }
  can_end_ = mark.can_end;
  history_tops_.resize(mark.begin);
  history_marks_.resize(i);
  return true;
}

}  // namespace tandem::grammar
