// ClockRounds: how far a worker rank's steady clock is from the front's, from round trips
// that arrive one at a time as messages (the front's send time t0, the worker's clock tw when
// it answered, the front's receive time t1): offset = tw - (t0 + t1) / 2, taken from the round
// trip with the shortest t1 - t0, whose error is at most half of it — clock_offset.h's
// estimate, for a rank whose MPI thread is a MessagePump rather than a blocking exchange. So
// that every rank's trace lines up with the front's without assuming the ranks share a clock
// (they do on one machine; not across machines). No MPI.
#pragma once

#include <cstdint>
#include <limits>

namespace tandem::dist {

class ClockRounds {
 public:
  // One round trip, in nanoseconds: t0 and t1 on the front's clock, tw on the worker's.
  void add(int64_t t0_ns, int64_t worker_ns, int64_t t1_ns);
  int rounds() const { return rounds_; }
  // The worker's clock minus the front's (0 before any round).
  int64_t offset_ns() const { return offset_ns_; }
  // The best round trip's duration: twice the offset's worst error.
  int64_t round_trip_ns() const { return round_trip_ns_; }
  // A time on the front's clock, on the worker's.
  int64_t to_worker(int64_t front_ns) const { return front_ns + offset_ns_; }

 private:
  int rounds_ = 0;
  int64_t offset_ns_ = 0;
  int64_t round_trip_ns_ = std::numeric_limits<int64_t>::max();
};

}  // namespace tandem::dist
