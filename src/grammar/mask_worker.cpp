// MaskWorker: one thread taking mask jobs in order; MaskJob::run turns fill_mask's result or
// exception into the job's outcome.
#include "grammar/mask_worker.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "base/error.h"

namespace tandem::grammar {

MaskJob::MaskJob(GrammarMatcher matcher_in, TokenMasker masker_in)
    : matcher(std::move(matcher_in)), masker(std::move(masker_in)), mask(mask_words(masker.trie().vocab_size())) {}

MaskJob::Outcome MaskJob::run() {
  error_.clear();
  try {
    if (stop_.load(std::memory_order_relaxed)) throw MaskStopped();
    outcome_ = masker.fill_mask(matcher, mask, &stop_) ? Outcome::Allowed : Outcome::NothingAllowed;
  } catch (const MaskStopped&) {
    outcome_ = Outcome::Stopped;
  } catch (const InputError& error) {
    outcome_ = Outcome::Error;
    error_ = error.what();
  }
  const Outcome outcome = outcome_;
  done_.store(true, std::memory_order_release);
  return outcome;
}

MaskWorker::MaskWorker(std::function<void()> on_done) : on_done_(std::move(on_done)) {}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (const auto& job : queue_) job->stop();
    if (running_) running_->stop();
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void MaskWorker::submit(std::shared_ptr<MaskJob> job) {
  TANDEM_ASSERT(job->done());
  job->done_.store(false, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  TANDEM_ASSERT(!stopping_);
  queue_.push_back(std::move(job));
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  wake_.notify_one();
}

void MaskWorker::loop() {
  // Below the forward pass's threads: on a machine with no core to spare, a grammar's masks
  // take CPU time from the grammar's own request (which waits for them), not from the steps
  // of the others. Best effort: nothing changes if the call is refused.
  const auto tid = static_cast<id_t>(gettid());
  errno = 0;
  if (const int current = getpriority(PRIO_PROCESS, tid); errno == 0)
    setpriority(PRIO_PROCESS, tid, std::min(19, current + kNicenessAbove));
  for (;;) {
    std::shared_ptr<MaskJob> job;
    {
      std::unique_lock lock(mutex_);
      running_.reset();
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      if (stopping_) job->stop();
      running_ = job;
    }
    n_started_.fetch_add(1, std::memory_order_relaxed);
    const MaskJob::Outcome outcome = job->run();
    if (outcome == MaskJob::Outcome::Stopped) n_stopped_.fetch_add(1, std::memory_order_relaxed);
    job.reset();  // a stopped job's owner may be gone: the last reference goes here
    if (on_done_) on_done_();
  }
}

}  // namespace tandem::grammar
