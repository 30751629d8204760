// EventQueue: one request's events on their way from the engine's thread (push) to the
// thread that reads the request's Stream (pop). Unbounded: the engine never waits on a
// slow reader, it only queues more text for it.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>

#include "tandem/tandem.h"

namespace tandem::api::detail {

class EventQueue {
 public:
  void push(Event event) {
    {
      std::lock_guard lock(mutex_);
      events_.push_back(std::move(event));
    }
    ready_.notify_one();
  }

  // Blocks until an event is there.
  Event pop() {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return !events_.empty(); });
    Event event = std::move(events_.front());
    events_.pop_front();
    return event;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Event> events_;
};

}  // namespace tandem::api::detail
