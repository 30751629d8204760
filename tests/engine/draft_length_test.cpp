// DraftLength: the adaptive proposal length shrinks when proposals fail (down to draft_min,
// or to rare one-token probes at 0), grows back when they land, and with no proposal ever
// accepted costs only a small fraction of an extra row per step.
#include <gtest/gtest.h>

#include "engine/speculation/draft_length.h"

namespace tandem {
namespace {

TEST(DraftLength, StartsAtTheMaximumAndGrowsBackOnFullAcceptance) {
  DraftLength length(0, 6);
  EXPECT_EQ(length.next(), 6);
  length.record(6, 2);  // two kept: next time three
  EXPECT_EQ(length.next(), 3);
  length.record(3, 3);
  EXPECT_EQ(length.next(), 4);
  length.record(4, 4);
  length.record(5, 5);
  length.record(6, 6);
  EXPECT_EQ(length.next(), 6);  // capped at draft_max
  length.record(0, 0);          // no proposal: nothing learnt
  EXPECT_EQ(length.next(), 6);
}

TEST(DraftLength, NeverBelowDraftMin) {
  DraftLength length(2, 4);
  for (int i = 0; i < 10; ++i) length.record(length.next(), 0);
  EXPECT_EQ(length.next(), 2);
}

TEST(DraftLength, ZeroAcceptanceCostsUnderTwoPercentOfARowPerStep) {
  // The bound behind "never more than 5 % slower than plain decoding": a verified proposal
  // costs at most one extra row of a decode step; with none ever accepted, rows spent on
  // proposals over many steps stay a small fraction of the steps.
  DraftLength length(0, 8);
  int64_t extra_rows = 0;
  const int64_t steps = 10000;
  for (int64_t step = 0; step < steps; ++step) {
    const int32_t drafted = length.next();
    extra_rows += drafted;
    length.record(drafted, 0);
  }
  EXPECT_LT(static_cast<double>(extra_rows) / steps, 0.02) << extra_rows << " extra rows in " << steps << " steps";
  EXPECT_GT(extra_rows, steps / DraftLength::kMaxBackoff / 2);  // it keeps probing
}

TEST(DraftLength, AProbeThatLandsRestartsSpeculation) {
  DraftLength length(0, 4);
  int32_t drafted = 0;
  for (int i = 0; i < 100 && drafted == 0; ++i) {  // fail down to 0, then wait for a probe
    drafted = length.next();
    if (drafted > 0 && length.length() > 0) {
      length.record(drafted, 0);
      drafted = 0;
    }
  }
  ASSERT_EQ(drafted, 1);  // the probe
  length.record(1, 1);
  EXPECT_EQ(length.next(), 2);
}

}  // namespace
}  // namespace tandem
