// PollBackoff: how a rank waits for MPI without holding a core. MPI's blocking waits spin (in
// OpenMPI's shared-memory transport, at 100 % of a core), and a machine may run more ranks than
// it has cores, each with its compute threads; so ranks poll (MPI_Iprobe / MPI_Test) and sleep
// between polls, each sleep twice the one before: a reply that comes at once is seen within
// microseconds, and a long wait (the next stage computing) costs a poll a millisecond, or one
// every 5 ms once nothing has come for a second (an idle server).
#pragma once

#include <algorithm>
#include <chrono>
#include <thread>

namespace tandem {

class PollBackoff {
 public:
  // Something arrived or completed: the next wait starts short again.
  void reset() {
    idle_since_ = std::chrono::steady_clock::now();
    sleep_ = kFirstSleep;
  }
  // Nothing yet: sleep before the next poll.
  void pause() {
    std::this_thread::sleep_for(sleep_);
    const bool idle = std::chrono::steady_clock::now() - idle_since_ > kIdleWindow;
    sleep_ = std::min<std::chrono::microseconds>(2 * sleep_, idle ? kIdleSleep : kBusySleep);
  }

 private:
  // Polls at a fixed 50 us made the computing rank beside the waiting one up to twice as slow
  // on a shared 2-core machine (every wake-up interrupts a core: tinyllama's halves took ~100
  // and ~130 ms a decode step under mpirun against 48 and 54 ms alone), so a waiting rank
  // backs off to 1 ms (then 48 and 54 ms under mpirun too): at most ~1 ms more per poll in a
  // step that takes tens of milliseconds. An idle stage rank polls 200 times a second (1 % of
  // a core, MPI_Improbe included).
  static constexpr auto kFirstSleep = std::chrono::microseconds(20);
  static constexpr auto kBusySleep = std::chrono::microseconds(1000);
  static constexpr auto kIdleSleep = std::chrono::microseconds(5000);
  static constexpr auto kIdleWindow = std::chrono::seconds(1);
  std::chrono::steady_clock::time_point idle_since_ = std::chrono::steady_clock::now();
  std::chrono::microseconds sleep_ = kFirstSleep;
};

}  // namespace tandem
