// DraftLength: how many tokens one sequence proposes next step, chosen so that speculating pays.
// It keeps an estimate of the chance alpha that a proposal is kept (each kept proposal counts for,
// each verified round that rejected one counts against; older rounds fade) and picks the length
// L that maximises the expected tokens per unit of time:
//
//   tokens(L) = 1 + alpha + ... + alpha^L           (the kept proposals and the step's own token)
//   cost(L)   = 1 + L * (draft_cost + kVerifyRowCost)   (in decode steps of the target)
//
// where draft_cost is one proposal's price (a draft model's weight bytes per token over the
// target's; 0 for prompt lookup) and kVerifyRowCost a verified row's (decode is bound by
// weight reads, so a few more rows in the same pass cost little). L = 0, plain decoding, is
// worth 1. When nothing beats it the sequence stops proposing, and probes with one token after
// a back-off that doubles with each probe that leaves proposing unprofitable, so a sequence whose proposals never land
// pays for one row every max-backoff steps at most. A draft model's probe also makes it catch
// up on every token since its last pass (prefill-priced, but never free), so its back-off
// grows further. draft_min forces at least that many proposals (the user's choice).
// Plain bookkeeping, no model, no clocks: the same history gives the same lengths.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem {

class DraftLength {
 public:
  // A verified row's cost as a fraction of a decode step: a 5-row verification of tinyllama
  // Q8_0 took ~1.2 decode steps on the 2-core Zen 5 of bench/RESULTS.md (self-draft, case a).
  static constexpr double kVerifyRowCost = 0.05;
  static constexpr int32_t kMaxBackoff = 64;              // steps between probes at length 0 (lookup)
  static constexpr int32_t kMaxDraftModelBackoff = 1024;  // the same for a draft model

  // draft_cost: one proposal's cost in target decode steps (0: prompt lookup).
  DraftLength(int32_t draft_min, int32_t draft_max, double draft_cost = 0.0)
      : min_(draft_min),
        max_(draft_max),
        draft_cost_(std::max(0.0, draft_cost)),
        max_backoff_(draft_cost > 0.0 ? kMaxDraftModelBackoff : kMaxBackoff) {}

  // Tokens to propose this step (0: skip speculation this step).
  int32_t next() {
    probing_ = false;
    const int32_t best = best_length();
    if (best > 0) return best;
    if (++idle_steps_ < backoff_) return 0;
    idle_steps_ = 0;
    probing_ = true;
    return std::min(1, max_);  // a probe
  }

  // The outcome of a verified proposal of `drafted` tokens, `accepted` of them kept.
  void record(int32_t drafted, int32_t accepted) {
    if (drafted <= 0) return;  // nothing was proposed (no n-gram match): nothing learnt
    kept_ = kept_ * kFade + accepted;
    rejected_ = rejected_ * kFade + (accepted < drafted ? 1.0 : 0.0);
    // A probe that lands restarts speculation only once the estimate says proposing pays; a
    // draft kept now and then (19 % for bench/spec's Q4_0 draft) must not buy a probe per step.
    if (best_length() > 0) {
      backoff_ = 1;
    } else if (probing_) {
      backoff_ = std::min(max_backoff_, backoff_ * 2);
    }
    probing_ = false;
  }

  // The estimated chance that a proposal is kept.
  double acceptance() const { return kept_ / (kept_ + rejected_); }

  // The length next() proposes unless probing: 0 when no length pays.
  int32_t best_length() const {
    const double alpha = acceptance();
    const double row_cost = draft_cost_ + kVerifyRowCost;
    int32_t best = 0;
    double best_rate = 1.0, tokens = 1.0, power = 1.0;
    for (int32_t length = 1; length <= max_; ++length) {
      power *= alpha;
      tokens += power;
      const double rate = tokens / (1.0 + length * row_cost);
      if (rate > best_rate) best = length, best_rate = rate;
    }
    return std::clamp(best, min_, max_);
  }

 private:
  // Each round's counts fade by this, so the estimate follows a text whose predictability
  // changes (about the last ten rounds weigh most).
  static constexpr double kFade = 0.9;

  int32_t min_;
  int32_t max_;
  double draft_cost_;
  int32_t max_backoff_;
  // Faded counts of kept proposals and of rounds that rejected one, starting from a prior of
  // 4 and 1 (alpha 0.8, so a new sequence starts by proposing) that fades like the rest.
  double kept_ = 4.0;
  double rejected_ = 1.0;
  int32_t idle_steps_ = 0;
  int32_t backoff_ = 1;
  bool probing_ = false;
};

}  // namespace tandem
