// catch_interrupts / take_interrupt (see interrupt.h). The handler does one lock-free store,
// which is all a signal handler may safely do here.
#include "cli/interrupt.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>

#include <atomic>

namespace tandem::cli {
namespace {

std::atomic<bool> interrupted{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void note_interrupt(int) { interrupted.store(true); }

}  // namespace

void catch_interrupts() {
  struct sigaction action {};
  action.sa_handler = note_interrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a blocked read returns EINTR
  sigaction(SIGINT, &action, nullptr);
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

void receive_interrupts_here() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
}

bool take_interrupt() { return interrupted.exchange(false); }

bool wait_readable_or_interrupt(int fd) {
  sigset_t sigint;
  sigemptyset(&sigint);
  sigaddset(&sigint, SIGINT);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &sigint, &previous);
  bool readable = false;
  for (;;) {
    if (take_interrupt()) break;
    pollfd target{.fd = fd, .events = POLLIN, .revents = 0};
    // Waits with the caller's mask (SIGINT unblocked): a pending Ctrl-C is delivered at once.
    const int ready = ppoll(&target, 1, nullptr, &previous);
    if (ready > 0) {
      readable = true;
      break;
    }
    if (ready < 0 && errno != EINTR) {
      readable = true;  // let the read report the error
      break;
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return readable;
}

}  // namespace tandem::cli
