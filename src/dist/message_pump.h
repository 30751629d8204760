// MessagePump: a rank's one MPI thread. Any thread posts byte messages (they are sent
// non-blocking, in the order posted per destination, each buffer kept until its send
// completes); the pump thread sends them, polls the sends in flight, and hands every message
// that arrived to a handler. A peer that is gone is forgotten: its sends in flight are given
// up (they would never complete) and later posts to it dropped, so no call here waits on a
// dead rank. Polls, never blocks in MPI: a rank waiting for work must not spin a core that
// another rank on the same machine computes on (run() backs off as dist/poll_backoff.h says).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <vector>

#include "dist/communicator.h"

namespace tandem::dist {

class MessagePump {
 public:
  explicit MessagePump(Communicator& comm) : comm_(comm) {}

  // Any thread.
  void post(int destination, int tag, std::vector<uint8_t> bytes);
  int64_t bytes_posted(int tag) const;  // what post() took under `tag`, all destinations
  // Summed over the completed sends under `tag`: posted to complete (for a large message, until
  // the receiver has taken it; MPI reports no finer).
  double seconds_in_flight(int tag) const;

  using Handler = std::function<void(const MessageInfo& info, std::vector<uint8_t>& bytes)>;
  // Pump thread: one round — start the posted sends, retire finished ones, hand each arrived
  // message to `handler`. Returns whether anything happened.
  bool pump_once(const Handler& handler);
  // Pump thread: rounds until `keep_going` returns false (asked between rounds), sleeping
  // after rounds where nothing happened (PollBackoff); `tick` runs every round.
  void run(const Handler& handler, const std::function<void()>& tick, const std::function<bool()>& keep_going);
  // Pump thread: sends are posted but not yet complete.
  bool sending() const;
  // Pump thread: rounds (arrivals dropped) until every posted send is complete or `timeout`
  // has passed — before MPI is finalised, so that a last message is not lost.
  void flush(std::chrono::steady_clock::duration timeout);

  // Any thread: `rank` is gone.
  void forget_rank(int rank);

  // Any thread: run() polls without sleeping for `duration` from now. For a round trip whose
  // length is the measurement (a clock offset's error bound): a sleep between polls would add
  // its wake-up latency to each leg. Brief windows only: awake, the pump spins a core.
  void stay_awake_for(std::chrono::steady_clock::duration duration);

  // A send that completed: to whom, under which tag, what (valid during the call only), and
  // when it was posted and found complete.
  struct CompletedSend {
    int destination = 0;
    int tag = 0;
    std::span<const uint8_t> bytes;
    std::chrono::steady_clock::time_point posted, completed;
  };
  using SendObserver = std::function<void(const CompletedSend& send)>;
  // Before the pump thread starts: `observer` sees each completed send, on the pump thread
  // (a trace's transfer spans). A send given up on for a dead peer is not seen.
  void set_send_observer(SendObserver observer) { send_observer_ = std::move(observer); }

 private:
  struct Outgoing {
    int destination = 0;
    int tag = 0;
    std::chrono::steady_clock::time_point posted;
    std::vector<uint8_t> bytes;
  };
  struct InFlight {
    int destination = 0;
    int tag = 0;
    std::chrono::steady_clock::time_point posted;
    std::unique_ptr<std::vector<uint8_t>> bytes;  // stable address while MPI reads it
    MpiRequest request;
  };

  Communicator& comm_;
  mutable std::mutex mutex_;
  std::deque<Outgoing> posted_;
  std::set<int> gone_;
  std::vector<int64_t> bytes_posted_ = std::vector<int64_t>(256, 0);       // by tag - 100
  std::vector<double> seconds_in_flight_ = std::vector<double>(256, 0.0);  // by tag - 100
  std::atomic<std::chrono::steady_clock::rep> awake_until_{0};             // stay_awake_for's, steady-clock ticks
  // Pump thread only.
  SendObserver send_observer_;
  std::vector<InFlight> in_flight_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> forgotten_;  // buffers of sends given up on
  std::vector<uint8_t> incoming_;
};

}  // namespace tandem::dist
