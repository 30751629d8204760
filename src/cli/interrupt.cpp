// catch_interrupts / take_interrupt (see interrupt.h). The handler does one lock-free store,
// which is all a signal handler may safely do here.
#include "cli/interrupt.h"

#include <pthread.h>
#include <signal.h>

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

}  // namespace tandem::cli
