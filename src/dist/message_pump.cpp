#include "dist/message_pump.h"

#include <algorithm>

#include "dist/poll_backoff.h"

namespace tandem::dist {

namespace {

size_t tag_slot(int tag) { return static_cast<size_t>(std::clamp(tag - 100, 0, 255)); }

}  // namespace

void MessagePump::post(int destination, int tag, std::vector<uint8_t> bytes) {
  std::lock_guard lock(mutex_);
  if (gone_.count(destination) != 0) return;
  bytes_posted_[tag_slot(tag)] += static_cast<int64_t>(bytes.size());
  posted_.push_back({destination, tag, std::chrono::steady_clock::now(), std::move(bytes)});
}

int64_t MessagePump::bytes_posted(int tag) const {
  std::lock_guard lock(mutex_);
  return bytes_posted_[tag_slot(tag)];
}

double MessagePump::seconds_in_flight(int tag) const {
  std::lock_guard lock(mutex_);
  return seconds_in_flight_[tag_slot(tag)];
}

void MessagePump::forget_rank(int rank) {
  std::lock_guard lock(mutex_);
  gone_.insert(rank);
  std::erase_if(posted_, [rank](const Outgoing& o) { return o.destination == rank; });
}

bool MessagePump::sending() const {
  std::lock_guard lock(mutex_);
  return !posted_.empty() || !in_flight_.empty();
}

void MessagePump::flush(std::chrono::steady_clock::duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  PollBackoff backoff;
  while (sending() && std::chrono::steady_clock::now() < deadline) {
    if (pump_once([](const MessageInfo&, std::vector<uint8_t>&) {})) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

bool MessagePump::pump_once(const Handler& handler) {
  bool progressed = false;
  std::deque<Outgoing> posted;
  std::set<int> gone;
  {
    std::lock_guard lock(mutex_);
    posted.swap(posted_);
    gone = gone_;
  }
  for (Outgoing& o : posted) {
    InFlight sending{o.destination, o.tag, o.posted, std::make_unique<std::vector<uint8_t>>(std::move(o.bytes)), {}};
    sending.request = comm_.send_async(o.destination, o.tag, *sending.bytes);
    in_flight_.push_back(std::move(sending));
    progressed = true;
  }
  std::erase_if(in_flight_, [&](InFlight& f) {
    if (gone.count(f.destination) != 0) {
      f.request.forget();
      forgotten_.push_back(std::move(f.bytes));
      return true;
    }
    if (!f.request.test().has_value()) return false;
    const std::chrono::steady_clock::time_point completed = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mutex_);
      seconds_in_flight_[tag_slot(f.tag)] += std::chrono::duration<double>(completed - f.posted).count();
    }
    if (send_observer_) send_observer_({f.destination, f.tag, *f.bytes, f.posted, completed});
    return true;
  });
  // Every message that is here now, each handed over before the next is received.
  while (const std::optional<MessageInfo> info = comm_.try_receive_any_size(kAnySource, kAnyTag, incoming_)) {
    progressed = true;
    handler(*info, incoming_);
  }
  return progressed;
}

void MessagePump::stay_awake_for(std::chrono::steady_clock::duration duration) {
  const std::chrono::steady_clock::rep until = (std::chrono::steady_clock::now() + duration).time_since_epoch().count();
  std::chrono::steady_clock::rep was = awake_until_.load();
  while (was < until && !awake_until_.compare_exchange_weak(was, until)) {
  }
}

void MessagePump::run(const Handler& handler, const std::function<void()>& tick,
                      const std::function<bool()>& keep_going) {
  PollBackoff backoff;
  while (keep_going()) {
    const bool progressed = pump_once(handler);
    tick();
    if (progressed || std::chrono::steady_clock::now().time_since_epoch().count() < awake_until_.load()) {
      backoff.reset();
    } else {
      backoff.pause();
    }
  }
}

}  // namespace tandem::dist
