// MaskWorker: computes grammar token masks on a thread of its own, so that one sequence's
// grammar work never holds the engine's step for the others (issue 33). The engine hands a
// sequence's MaskJob over as soon as its grammar has taken its last token; the worker fills
// the next mask while the engine runs the next forward pass; the engine samples from it once
// it is done, and a sequence whose mask is not done yet waits for it (its logits kept) while
// the other sequences go on stepping. A job whose request ends is stopped inside its mask
// (TokenMasker's stop flag), so abandoned grammar work ends within microseconds.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grammar/matcher.h"
#include "grammar/token_mask.h"

namespace tandem::grammar {

// One sequence's grammar state (its matcher and masker) and its next mask. While a mask is
// being computed for it (submitted and not done()), only the worker touches matcher, masker
// and mask; otherwise only the owner does.
class MaskJob {
 public:
  enum class Outcome {
    Allowed,         // mask holds the allowed tokens
    NothingAllowed,  // no token can continue (TokenMasker::fill_mask returned false)
    Error,           // a matching limit was passed: error() says which
    Stopped,         // stop() was called first: the job is useless from here on
  };

  MaskJob(GrammarMatcher matcher, TokenMasker masker);

  // Computes the mask for the matcher's current state on the calling thread, then marks the
  // job done (also what the worker runs). Returns the outcome (read before the job is marked
  // done: afterwards the owner may start it again).
  Outcome run();
  // Whether the last computation is finished and its results may be read (acquire: the
  // worker's writes to matcher, masker and mask are visible once this is true).
  bool done() const { return done_.load(std::memory_order_acquire); }
  Outcome outcome() const { return outcome_; }
  const std::string& error() const { return error_; }
  // Asks a queued or running computation to give up (any thread). Once stopped, the matcher
  // may be half way through an operation: the job must not be used again.
  void stop() { stop_.store(true, std::memory_order_relaxed); }

  GrammarMatcher matcher;
  TokenMasker masker;
  std::vector<uint32_t> mask;  // [mask_words(vocab_size)]

 private:
  friend class MaskWorker;
  std::atomic<bool> stop_{false};
  std::atomic<bool> done_{true};
  Outcome outcome_ = Outcome::NothingAllowed;
  std::string error_;
};

class MaskWorker {
 public:
  // How much nicer than the process the worker thread runs (Linux: niceness is per thread).
  static constexpr int kNicenessAbove = 10;

  // on_done runs on the worker's thread after each job it finishes (so the owner can wake).
  explicit MaskWorker(std::function<void()> on_done);
  // Stops the queued and running jobs and joins the thread.
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Queues the job's next mask; the job must be done() (not in flight). Thread-safe. The
  // thread starts with the first job.
  void submit(std::shared_ptr<MaskJob> job);
  // Jobs the worker has begun, and of those, the ones stopped before their mask was complete.
  uint64_t n_started() const { return n_started_.load(std::memory_order_relaxed); }
  uint64_t n_stopped() const { return n_stopped_.load(std::memory_order_relaxed); }

 private:
  void loop();

  std::function<void()> on_done_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<MaskJob>> queue_;
  std::shared_ptr<MaskJob> running_;  // the job being computed, for the destructor to stop
  bool stopping_ = false;
  std::atomic<uint64_t> n_started_{0}, n_stopped_{0};
  std::thread thread_;
};

}  // namespace tandem::grammar
