// A persistent pool of worker threads for data-parallel loops. Threads are created once;
// each parallel_for wakes them, splits [0, n) into contiguous ranges, and waits at a
// barrier. The calling thread takes part as worker 0, so a pool of 1 runs inline.
// A forward pass issues dozens of parallel loops per token, so idle workers spin briefly on
// an atomic generation counter before sleeping: waking a sleeping thread costs far more
// than a small loop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  // n_threads <= 0 means every core the machine has.
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(begin, end, thread_index) over [0, n) split into size() contiguous ranges,
  // each range a multiple of `grain` (except the last). Returns when all ranges are done.
  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

 private:
  void worker_loop(int thread_index);
  void run_share(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stopping_ = false;
  // The job of the current generation.
  const RangeFn* job_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
};

}  // namespace tandem
