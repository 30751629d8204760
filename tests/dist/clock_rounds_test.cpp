// ClockRounds (dist/clock_rounds.h): a worker clock ahead of or behind the front's is found
// from the shortest round trip, within half of it, whatever order the round trips come in;
// a round trip that goes backwards is ignored.
#include "dist/clock_rounds.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tandem::dist {
namespace {

TEST(ClockRounds, TheShortestRoundTripGivesTheOffset) {
  constexpr int64_t kAhead = 5'000'000'000;  // the worker's clock is 5 s ahead
  ClockRounds clock;
  EXPECT_EQ(clock.offset_ns(), 0);
  // A slow round trip (the answer waited 3 ms on the way back), then a quick symmetric one.
  clock.add(1'000'000, 1'000'000 + 100'000 + kAhead, 1'000'000 + 3'200'000);
  EXPECT_EQ(clock.rounds(), 1);
  EXPECT_LE(std::abs(clock.offset_ns() - kAhead), clock.round_trip_ns() / 2);
  clock.add(10'000'000, 10'000'000 + 20'000 + kAhead, 10'000'000 + 40'000);
  EXPECT_EQ(clock.offset_ns(), kAhead);
  EXPECT_EQ(clock.round_trip_ns(), 40'000);
  // A later slower one changes nothing.
  clock.add(20'000'000, 20'000'000 + 900'000 + kAhead, 20'000'000 + 1'000'000);
  EXPECT_EQ(clock.offset_ns(), kAhead);
  EXPECT_EQ(clock.rounds(), 3);
  EXPECT_EQ(clock.to_worker(7), 7 + kAhead);
}

TEST(ClockRounds, AWorkerBehindIsANegativeOffsetAndBackwardsRoundTripsAreIgnored) {
  ClockRounds clock;
  clock.add(2'000'000, 2'000'000 + 10'000 - 300'000, 2'000'000 + 20'000);
  EXPECT_EQ(clock.offset_ns(), -300'000);
  clock.add(5'000'000, 0, 4'000'000);  // t1 before t0
  EXPECT_EQ(clock.offset_ns(), -300'000);
  EXPECT_EQ(clock.round_trip_ns(), 20'000);
  EXPECT_EQ(clock.to_worker(1'000'000), 700'000);
}

}  // namespace
}  // namespace tandem::dist
