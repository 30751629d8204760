// DraftLength: the proposal length follows the estimated acceptance and the proposals' price:
// long when proposals land and are cheap, none when they do not pay (then rare one-token
// probes), never below draft_min, and with no proposal ever accepted only a small fraction of
// an extra row per step.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/speculation/draft_length.h"

namespace tandem {
namespace {

TEST(DraftLength, CheapProposalsThatLandRunAtTheMaximum) {
  DraftLength length(0, 6);  // prompt lookup: proposals cost only their verified rows
  EXPECT_EQ(length.next(), 6);
  for (int i = 0; i < 20; ++i) length.record(6, 6);
  EXPECT_GT(length.acceptance(), 0.99);
  EXPECT_EQ(length.next(), 6);
  length.record(0, 0);  // no proposal: nothing learnt
  EXPECT_EQ(length.next(), 6);
}

TEST(DraftLength, LengthFollowsTheExpectedTokensPerCost) {
  // The chosen length maximises (1 + a + ... + a^L) / (1 + L * (draft_cost + row cost)); check it
  // against that formula evaluated independently for a run of outcomes.
  for (const double draft_cost : {0.0, 0.1, 0.3}) {
    DraftLength length(0, 8, draft_cost);
    for (int round = 0; round < 30; ++round) {
      const int32_t drafted = length.next();
      if (drafted == 0) continue;
      length.record(drafted, round % 3 == 0 ? 0 : drafted / 2);
      const double alpha = length.acceptance();
      int32_t expected = 0;
      double best = 1.0;
      for (int32_t l = 1; l <= 8; ++l) {
        const double tokens = (1.0 - std::pow(alpha, l + 1)) / (1.0 - alpha);
        const double rate = tokens / (1.0 + l * (draft_cost + DraftLength::kVerifyRowCost));
        if (rate > best + 1e-12) expected = l, best = rate;
      }
      EXPECT_EQ(length.best_length(), expected) << "alpha " << alpha << " cost " << draft_cost;
    }
  }
}

TEST(DraftLength, AnExpensiveDraftStopsProposingOnceItFails) {
  // A draft as costly as half a target step pays only above ~60 % acceptance.
  DraftLength length(0, 4, 0.53);
  int32_t proposed = 0;
  for (int step = 0; step < 200; ++step) {
    const int32_t drafted = length.next();
    proposed += drafted;
    length.record(drafted, 0);
  }
  EXPECT_EQ(length.best_length(), 0);
  EXPECT_LT(proposed, 12) << "proposals of a draft that never lands should stop after a few rounds";
}

TEST(DraftLength, AnExpensiveDraftThatLandsNowAndThenProbesRarely) {
  // One proposal in five kept, at half a target step each: proposing never pays, so a landing
  // probe must not restart speculation (it did: a probe per step, 16 % slower than plain).
  DraftLength length(0, 4, 0.53);
  int32_t proposed = 0, rounds = 0;
  for (int step = 0; step < 2000; ++step) {
    const int32_t drafted = length.next();
    if (drafted == 0) continue;
    proposed += drafted;
    length.record(drafted, ++rounds % 5 == 0 ? 1 : 0);
  }
  EXPECT_LT(proposed, 40) << "proposals in 2000 steps";
}

TEST(DraftLength, ASelfDraftNeverPaysButIsStillChecked) {
  // The target as its own draft (cost 1): every proposal lands, yet proposing L tokens costs
  // more than the L + 1 tokens it yields, so only one-token probes run.
  DraftLength length(0, 4, 1.0);
  for (int step = 0; step < 10; ++step) {
    const int32_t drafted = length.next();
    EXPECT_LE(drafted, 1);
    length.record(drafted, drafted);
  }
  EXPECT_EQ(length.best_length(), 0);
}

TEST(DraftLength, NeverBelowDraftMin) {
  DraftLength length(2, 4, 0.5);
  for (int i = 0; i < 10; ++i) length.record(length.next(), 0);
  EXPECT_EQ(length.next(), 2);
}

TEST(DraftLength, ZeroAcceptanceCostsUnderTwoPercentOfARowPerStep) {
  // The bound behind "never more than 5 % slower than plain decoding": a verified proposal
  // costs one extra row of a decode step (about kVerifyRowCost of a step); with none ever
  // accepted, rows spent on proposals over many steps stay a small fraction of the steps
  // (the first ~20 rounds, while the estimate falls from its prior, then a probe per 64 steps).
  DraftLength length(0, 8);
  int64_t extra_rows = 0;
  const int64_t steps = 10000;
  for (int64_t step = 0; step < steps; ++step) {
    const int32_t drafted = length.next();
    extra_rows += drafted;
    length.record(drafted, 0);
  }
  EXPECT_LT(static_cast<double>(extra_rows) / steps, 0.025) << extra_rows << " extra rows in " << steps << " steps";
  EXPECT_GT(extra_rows, steps / DraftLength::kMaxBackoff / 2);  // it keeps probing
}

TEST(DraftLength, ProbesThatLandRestartSpeculation) {
  DraftLength length(0, 4);
  int32_t drafted = 0;
  int steps = 0;
  while (length.best_length() > 0 && steps++ < 100) length.record(length.next(), 0);  // fail down to 0
  ASSERT_EQ(length.best_length(), 0);
  for (int i = 0; i < 100 && drafted == 0; ++i) drafted = length.next();
  ASSERT_EQ(drafted, 1);  // the probe
  length.record(1, 1);
  for (int i = 0; i < 10; ++i) {
    const int32_t n = length.next();
    length.record(n, n);
  }
  EXPECT_GT(length.best_length(), 1) << "landing probes raise the estimate until proposing pays again";
}

}  // namespace
}  // namespace tandem
