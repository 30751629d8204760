#include "dist/clock_rounds.h"

namespace tandem::dist {

void ClockRounds::add(int64_t t0_ns, int64_t worker_ns, int64_t t1_ns) {
  ++rounds_;
  const int64_t round_trip = t1_ns - t0_ns;
  if (round_trip < 0 || round_trip >= round_trip_ns_) return;  // a negative one is a clock gone backwards: useless
  round_trip_ns_ = round_trip;
  // t0 + round_trip / 2 rather than (t0 + t1) / 2: no overflow near the clock's range.
  offset_ns_ = worker_ns - (t0_ns + round_trip / 2);
}

}  // namespace tandem::dist
