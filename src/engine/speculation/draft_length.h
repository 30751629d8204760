// DraftLength: how many tokens one sequence proposes next step, adapted to how its proposals
// fare, so that speculating is never much slower than plain decoding. Full acceptance grows
// the length (up to draft_max); a rejection cuts it to what was accepted plus one, and a
// wholly rejected draft halves it, down to draft_min. At 0 it probes with one token after a
// back-off that doubles with each failed probe, so a sequence whose proposals never land
// pays for one extra row every kMaxBackoff steps at most. Plain bookkeeping, no model.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem {

class DraftLength {
 public:
  static constexpr int32_t kMaxBackoff = 64;  // steps between probes at length 0, at most

  DraftLength(int32_t draft_min, int32_t draft_max) : min_(draft_min), max_(draft_max), length_(draft_max) {}

  // Tokens to propose this step (0: skip speculation this step).
  int32_t next() {
    if (length_ > 0) return length_;
    if (++idle_steps_ < backoff_) return 0;
    idle_steps_ = 0;
    return std::min(1, max_);  // a probe
  }

  // The outcome of a verified proposal of `drafted` tokens, `accepted` of them kept.
  void record(int32_t drafted, int32_t accepted) {
    if (drafted <= 0) return;  // nothing was proposed (no n-gram match): nothing learnt
    if (accepted == drafted) {
      length_ = std::min(max_, std::max(length_, drafted) + 1);
      backoff_ = 1;
    } else if (accepted > 0) {
      length_ = std::clamp(accepted + 1, min_, max_);
      backoff_ = 1;
    } else {
      if (length_ == 0) backoff_ = std::min(kMaxBackoff, backoff_ * 2);  // a failed probe
      length_ = std::max(min_, length_ / 2);
    }
  }

  int32_t length() const { return length_; }

 private:
  int32_t min_;
  int32_t max_;
  int32_t length_;
  int32_t idle_steps_ = 0;
  int32_t backoff_ = 1;
};

}  // namespace tandem
