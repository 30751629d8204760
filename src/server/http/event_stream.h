// EventStream: one request's engine events, handed from the engine thread to the connection
// coroutine on the I/O thread. push() never blocks the engine: it queues the event and posts
// a wake-up (cancelling the timer the coroutine waits on) to the I/O thread.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <mutex>
#include <vector>

#include "engine/generation_service.h"

namespace tandem::server {

class EventStream : public std::enable_shared_from_this<EventStream> {
 public:
  explicit EventStream(boost::asio::any_io_executor io) : io_(std::move(io)) {}

  // Engine thread.
  void push(RequestEvent&& event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    }
    // The waiter pointer is only touched on the I/O thread, so the wake-up goes there.
    boost::asio::post(io_, [self = shared_from_this()] {
      if (self->waiter_ != nullptr) self->waiter_->cancel();
    });
  }

  // I/O thread: moves every queued event into `out` (appending); false when none.
  bool pop_all(std::vector<RequestEvent>& out) {
    std::lock_guard lock(mutex_);
    if (events_.empty()) return false;
    for (RequestEvent& event : events_) out.push_back(std::move(event));
    events_.clear();
    return true;
  }

  // I/O thread: the timer a push() cancels (nullptr: none waiting).
  void set_waiter(boost::asio::steady_timer* timer) { waiter_ = timer; }

 private:
  boost::asio::any_io_executor io_;
  std::mutex mutex_;
  std::vector<RequestEvent> events_;
  boost::asio::steady_timer* waiter_ = nullptr;
};

// I/O thread: `timer` is the stream's waiter for this object's lifetime (a coroutine's wait on
// its events), cleared before the timer goes.
class ScopedWaiter {
 public:
  ScopedWaiter(EventStream& events, boost::asio::steady_timer& timer) : events_(events) { events_.set_waiter(&timer); }
  ~ScopedWaiter() { events_.set_waiter(nullptr); }
  ScopedWaiter(const ScopedWaiter&) = delete;
  ScopedWaiter& operator=(const ScopedWaiter&) = delete;

 private:
  EventStream& events_;
};

}  // namespace tandem::server
