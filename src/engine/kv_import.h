// KvImport: one decode-side request's KV blocks computed in another process (disaggregated
// serving: a prefill rank computes the prompt, the decode rank that owns the request receives
// its blocks), handed from the thread that receives them (src/dist) to the engine thread,
// which holds blocks for them, copies them in, and admits the request once all are there.
// Thread-safe; knows no MPI and no scheduling.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tandem {

class KvImport {
 public:
  // The prompt's blocks [0, n_blocks) come from elsewhere (its positions from
  // n_blocks * block_size on are computed here). `on_ready` runs once, on the engine thread,
  // when the engine holds blocks for them: with the first block it still needs (those before
  // were in its prefix cache, so they are not sent again). It must not block.
  KvImport(int64_t n_blocks, std::function<void(int64_t first_needed)> on_ready)
      : n_blocks_(n_blocks), on_ready_(std::move(on_ready)) {}

  int64_t n_blocks() const { return n_blocks_; }

  // Receiving thread: a KV block message (kv/kv_block_message.h) for one needed block.
  void add(std::vector<uint8_t> message) {
    std::lock_guard lock(mutex_);
    messages_.push_back(std::move(message));
    if (wake_) wake_();
  }
  // Receiving thread: every needed block has been added.
  void complete() {
    std::lock_guard lock(mutex_);
    complete_ = true;
    if (wake_) wake_();
  }
  // Any thread: the blocks will not come (the prefill rank failed); the request ends with
  // FinishReason::Error.
  void fail(std::string reason) {
    std::lock_guard lock(mutex_);
    if (!failure_) failure_ = std::move(reason);
    if (wake_) wake_();
  }

  // The engine's: called (under this import's lock, so it must not call back into it) when
  // something arrives, to wake its step loop; cleared when the request ends, so nothing
  // calls into an engine that is gone.
  void set_wake(std::function<void()> wake) {
    std::lock_guard lock(mutex_);
    wake_ = std::move(wake);
  }

  // Engine thread: what arrived since the last call.
  struct Arrived {
    std::vector<std::vector<uint8_t>> messages;
    bool complete = false;  // nothing more will arrive
    std::optional<std::string> failure;
  };
  Arrived take() {
    std::lock_guard lock(mutex_);
    Arrived arrived;
    arrived.messages.swap(messages_);
    arrived.complete = complete_;
    arrived.failure = failure_;
    return arrived;
  }
  // Engine thread, once.
  void ready(int64_t first_needed) {
    if (on_ready_) on_ready_(first_needed);
    on_ready_ = nullptr;
  }

 private:
  const int64_t n_blocks_;
  std::function<void(int64_t)> on_ready_;  // engine thread only
  std::mutex mutex_;
  std::function<void()> wake_;
  std::vector<std::vector<uint8_t>> messages_;
  bool complete_ = false;
  std::optional<std::string> failure_;
};

}  // namespace tandem
