// ThreadPool: workers sleep on a condition variable between jobs; a job is published by
// bumping a generation counter, and the caller waits until every worker has finished.
#include "base/thread_pool.h"

#include <algorithm>

namespace tandem {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::run_share(int thread_index) {
  const int64_t n_grains = (job_n_ + job_grain_ - 1) / job_grain_;
  const int64_t first = n_grains * thread_index / n_threads_;
  const int64_t last = n_grains * (thread_index + 1) / n_threads_;
  const int64_t begin = std::min(job_n_, first * job_grain_);
  const int64_t end = std::min(job_n_, last * job_grain_);
  if (begin < end) (*job_)(begin, end, thread_index);
}

void ThreadPool::worker_loop(int thread_index) {
  uint64_t seen_generation = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen_generation; });
      if (stopping_) return;
      seen_generation = generation_;
    }
    run_share(thread_index);
    {
      std::lock_guard lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_grain_ = grain;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  wake_.notify_all();
  run_share(0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

}  // namespace tandem
