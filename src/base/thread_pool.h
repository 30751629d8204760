// A persistent pool of worker threads for data-parallel loops. Threads are created once;
// each parallel_for publishes one job, cut into a few chunks per thread that every thread,
// the caller included (as thread 0), claims from an atomic counter; a pool of 1 runs inline.
// Claiming rather than a fixed share per thread is what keeps a shared machine usable: a
// worker the OS has descheduled just claims nothing, and the others take its share.
// Waiting (a worker for the next job, the caller for the last chunk) spins a few
// microseconds, yields a little, then sleeps on a futex, so a busy core is given back.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace tandem {

class ThreadPool {
 public:
  // n_threads <= 0 means every core the machine has.
  explicit ThreadPool(int n_threads = 0);
  // The thread count n_threads <= 0 gives: every core (every command's default -t).
  static int default_size();
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(begin, end, thread_index) over disjoint ranges covering [0, n), each a multiple
  // of `grain` except the one that ends at n; returns when all are done. thread_index is in
  // [0, size()) and no two ranges running at the same time share one, so it can pick a
  // per-thread scratch buffer; one thread may run several ranges, one after another. How
  // [0, n) is cut (and which thread runs what) varies from call to call: results must not
  // depend on it. One caller at a time; a parallel_for from inside fn runs inline, as one
  // range with the enclosing thread_index.
  using RangeFn = std::function<void(int64_t begin, int64_t end, int thread_index)>;
  void parallel_for(int64_t n, const RangeFn& fn, int64_t grain = 1);

  // Told of every chunk a thread runs, with its steady-clock times (the profiler's per-thread
  // trace tracks). Off (null) by default: then a chunk costs one relaxed load more. Called on
  // the thread that ran the chunk; set it only between parallel_for calls.
  class ChunkObserver {
   public:
    virtual void on_chunk(int thread_index, int64_t start_ns, int64_t end_ns) = 0;

   protected:
    ~ChunkObserver() = default;
  };
  void set_chunk_observer(ChunkObserver* observer) { chunk_observer_.store(observer, std::memory_order_relaxed); }

 private:
  void worker_loop(int thread_index);
  // Claims chunks of job `seq` and runs them until none is left; false when it got none.
  void run_chunks(uint32_t seq, int thread_index);
  bool claim_chunk(uint32_t seq, uint32_t& chunk, uint32_t& n_chunks);
  // Returns once job_seq_ differs from `seen`: spin, yield, then sleep.
  uint32_t wait_for_job(uint32_t seen);
  // Returns once chunks_done_ reaches n_chunks: spin, yield, then sleep.
  void wait_until_done(uint32_t n_chunks);

  int n_threads_;
  std::vector<std::thread> workers_;

  // The published job: its number, bumped per job (workers wait on it, a futex word).
  std::atomic<uint32_t> job_seq_{0};
  // The claim counter: job number << 32 | chunk count << 16 | next chunk. Carrying the job
  // number makes a late worker's claim on a finished job fail instead of taking a chunk of
  // the next one; carrying the count lets a claim be checked without reading the job.
  std::atomic<uint64_t> next_chunk_{0};
  // Chunks of the current job finished (the caller may sleep on it, a futex word).
  std::atomic<uint32_t> chunks_done_{0};
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> caller_sleeping_{false};
  std::atomic<bool> stopping_{false};
  // Published to the workers with each job (the job_seq_ store orders it), hence relaxed.
  std::atomic<ChunkObserver*> chunk_observer_{nullptr};
  // The job itself, written before job_seq_ is published and read only after a claim
  // succeeds (then the job cannot have finished, so these are still the caller's).
  const RangeFn* job_fn_ = nullptr;
  int64_t job_n_ = 0;
  int64_t job_grain_ = 1;
  int64_t job_grains_ = 0;
};

}  // namespace tandem
