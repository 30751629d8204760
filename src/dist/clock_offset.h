// Clock offsets between ranks, so that times another rank reports (a pipeline stage's
// timings) can be placed on this rank's clock: steady clocks of two processes share no origin
// in general (two machines), even though on one Linux machine they do. One exchange, NTP's
// idea: this rank sends its clock t0, the peer answers with its own tp, the answer arrives at
// t1; if both legs took equally long, tp was read at (t0 + t1) / 2, so the peer's clock is
// ahead by tp - (t0 + t1) / 2, wrong by at most (t1 - t0) / 2. Of several rounds the one with
// the shortest round trip is kept (the estimate: clock_rounds.h). Messages: ClockPing on
// kTagClock (pipeline_messages.h).
#pragma once

#include <cstdint>

#include "dist/communicator.h"

namespace tandem {

struct ClockOffset {
  int64_t offset_ns = 0;      // the peer's steady clock minus this rank's
  int64_t round_trip_ns = 0;  // of the round kept: twice the bound on offset_ns's error
};

// Asks `peer` (which runs answer_clock_pings) for `rounds` readings, then tells it the
// exchange is over. Steady-clock ns throughout.
ClockOffset measure_clock_offset(Communicator& comm, int peer, int rounds = 16);
// Answers `asker`'s pings with this rank's clock until it says the exchange is over.
void answer_clock_pings(Communicator& comm, int asker);

// This rank's steady clock, in ns (what both sides read).
int64_t steady_clock_ns();

}  // namespace tandem
