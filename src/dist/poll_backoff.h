// PollBackoff: how a rank waits for MPI without holding a core. MPI's blocking waits spin (in
// OpenMPI's shared-memory transport, at 100 % of a core), and a machine may run more ranks than
// it has cores, each with its compute threads; so ranks poll (MPI_Iprobe / MPI_Test) and sleep
// between polls: briefly while messages are flowing (a pipeline step's hops), longer once none
// has come for a while, longest for an idle server.
#pragma once

#include <chrono>
#include <thread>

namespace tandem {

class PollBackoff {
 public:
  // Something arrived or completed: the next waits are short again.
  void reset() { idle_since_ = std::chrono::steady_clock::now(); }
  // Nothing yet: sleep before the next poll.
  void pause() {
    const auto idle = std::chrono::steady_clock::now() - idle_since_;
    std::this_thread::sleep_for(idle < kBusyWindow ? kShortSleep : idle < kIdleWindow ? kLongSleep : kIdleSleep);
  }

 private:
  // A step's hop costs ~kShortSleep of latency at worst. A stage rank of an idle server wakes
  // 200 times a second (1 % of a core, MPI_Improbe included; 3.6 % at 1 ms), and the
  // first step after a quiet second waits up to kIdleSleep longer.
  static constexpr auto kShortSleep = std::chrono::microseconds(50);
  static constexpr auto kLongSleep = std::chrono::milliseconds(1);
  static constexpr auto kIdleSleep = std::chrono::milliseconds(5);
  static constexpr auto kBusyWindow = std::chrono::milliseconds(200);
  static constexpr auto kIdleWindow = std::chrono::seconds(1);
  std::chrono::steady_clock::time_point idle_since_ = std::chrono::steady_clock::now();
};

}  // namespace tandem
