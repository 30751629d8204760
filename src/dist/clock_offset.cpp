// Clock offsets (see clock_offset.h): ping, answer, keep the shortest round trip.
#include "dist/clock_offset.h"

#include <chrono>
#include <vector>

#include "dist/clock_rounds.h"
#include "dist/pipeline_messages.h"
#include "dist/poll_backoff.h"

namespace tandem {

namespace {

// The exchange's messages follow one another at once: each side polls without sleeping for a
// short window after its last message (a sleep, however short, is a wake-up's latency added to
// the round trip and so to the error bound), then backs off as any wait does.
constexpr int64_t kSpinNs = 2'000'000;

void receive_from(Communicator& comm, int peer, std::vector<uint8_t>& bytes) {
  const int64_t since = steady_clock_ns();
  PollBackoff backoff;
  while (!comm.try_receive_any_size(peer, kTagClock, bytes))
    if (steady_clock_ns() - since > kSpinNs) backoff.pause();
}

}  // namespace

int64_t steady_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

ClockOffset measure_clock_offset(Communicator& comm, int peer, int rounds) {
  dist::ClockRounds estimate;
  std::vector<uint8_t> bytes;
  for (int round = 0; round < rounds; ++round) {
    const int64_t sent = steady_clock_ns();
    pack_clock_ping({.done = false, .clock_ns = sent}, bytes);
    comm.send(peer, kTagClock, bytes);
    receive_from(comm, peer, bytes);
    const int64_t received = steady_clock_ns();
    estimate.add(sent, unpack_clock_ping(bytes).clock_ns, received);
  }
  pack_clock_ping({.done = true, .clock_ns = 0}, bytes);
  comm.send(peer, kTagClock, bytes);
  return {.offset_ns = estimate.offset_ns(), .round_trip_ns = estimate.round_trip_ns()};
}

void answer_clock_pings(Communicator& comm, int asker) {
  std::vector<uint8_t> bytes;
  // The first ping comes once rank 0 has heard from every stage: wait for it as any wait.
  PollBackoff backoff;
  while (!comm.try_receive_any_size(asker, kTagClock, bytes)) backoff.pause();
  for (;;) {
    if (unpack_clock_ping(bytes).done) return;
    pack_clock_ping({.done = false, .clock_ns = steady_clock_ns()}, bytes);
    comm.send(asker, kTagClock, bytes);
    receive_from(comm, asker, bytes);
  }
}

}  // namespace tandem
