// PollBackoff: how a rank waits for MPI without holding a core. MPI's blocking waits spin (in
// OpenMPI's shared-memory transport, at 100 % of a core), and a machine may run more ranks than
// it has cores, each with its compute threads; so ranks poll (MPI_Iprobe / MPI_Test) and sleep
// between polls: briefly while messages are flowing (a pipeline step's hops), longer once none
// has come for a while (an idle server).
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
    std::this_thread::sleep_for(idle < kBusyWindow ? kShortSleep : kLongSleep);
  }

 private:
  // A step's hop costs ~kShortSleep of latency at worst; an idle rank wakes 1,000 times a second.
  static constexpr auto kShortSleep = std::chrono::microseconds(50);
  static constexpr auto kLongSleep = std::chrono::milliseconds(1);
  static constexpr auto kBusyWindow = std::chrono::milliseconds(200);
  std::chrono::steady_clock::time_point idle_since_ = std::chrono::steady_clock::now();
};

}  // namespace tandem
