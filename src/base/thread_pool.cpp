// ThreadPool: a job is published by bumping an atomic generation counter (under the mutex,
// so a worker about to sleep cannot miss it); workers spin on it for a while, then sleep on
// the condition variable. The caller spins until every worker has finished its share.
#include "base/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define TANDEM_CPU_RELAX() _mm_pause()
#else
#define TANDEM_CPU_RELAX() std::this_thread::yield()
#endif

namespace tandem {

namespace {
// Spin iterations (each a pause, ~tens of ns) before an idle worker goes to sleep.
constexpr int kSpinBeforeSleep = 20000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    generation_.fetch_add(1, std::memory_order_release);
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
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen_generation && spins < kSpinBeforeSleep) {
      TANDEM_CPU_RELAX();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen_generation) {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen_generation; });
    }
    seen_generation = generation_.load(std::memory_order_acquire);
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    run_share(thread_index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n, 0);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_share(0);
  while (pending_.load(std::memory_order_acquire) != 0) TANDEM_CPU_RELAX();
  job_ = nullptr;
}

}  // namespace tandem
