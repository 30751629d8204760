// ThreadPool: a job is [0, n) cut into at most kChunksPerThread chunks per thread, each a
// whole number of grains, claimed one at a time from next_chunk_ by the caller and whichever
// workers are awake. The caller returns when chunks_done_ counts them all. Sleeping on both
// sides is a futex (std::atomic wait/notify), entered only after spinning and yielding, and
// the waker calls notify only when someone has said it sleeps (a Dekker pair of seq_cst
// operations: the sleeper announces itself then rechecks, the waker publishes then checks).
#include "base/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#define TANDEM_CPU_RELAX() _mm_pause()
#else
#define TANDEM_CPU_RELAX() std::this_thread::yield()
#endif

namespace tandem {

namespace {

// Enough chunks that a descheduled thread's share is small and gets taken by the others,
// few enough that claiming (one atomic each) stays negligible next to the work.
constexpr int64_t kChunksPerThread = 4;
constexpr int64_t kMaxChunks = 0xffff;  // the chunk fields of next_chunk_ are 16 bits
// A forward pass is dozens of parallel loops per token a few microseconds apart: spinning
// that long keeps a wake-up (several microseconds through the kernel) off the common path.
// Past it, yield for a while (a runnable thread on this core gets it), then sleep, so a
// thread that waits for a descheduled one hands its core over instead of burning it.
constexpr std::chrono::nanoseconds kSpinTime{std::chrono::microseconds(5)};
constexpr std::chrono::nanoseconds kYieldTime{std::chrono::microseconds(50)};

struct ActiveJob {
  const ThreadPool* pool = nullptr;
  int thread_index = 0;
};
// The pool whose chunk this thread is running, so a nested parallel_for runs inline.
thread_local ActiveJob active_job;

// Spins, then yields, then returns false, checking `ready` in between; true once it holds.
template <typename Ready>
bool spin_then_yield(Ready ready) {
  if (ready()) return true;  // the common case, before paying for the clock
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (ready()) return true;
      TANDEM_CPU_RELAX();
    }
    if (Clock::now() - start >= kSpinTime) break;
  }
  for (;;) {
    if (ready()) return true;
    std::this_thread::yield();
    if (Clock::now() - start >= kSpinTime + kYieldTime) return ready();
  }
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr uint64_t pack(uint32_t seq, uint32_t n_chunks, uint32_t next) {
  return static_cast<uint64_t>(seq) << 32 | static_cast<uint64_t>(n_chunks) << 16 | next;
}

}  // namespace

int ThreadPool::default_size() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = default_size();
  n_threads_ = n_threads;
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stopping_.store(true, std::memory_order_seq_cst);
  job_seq_.fetch_add(1, std::memory_order_seq_cst);
  job_seq_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

bool ThreadPool::claim_chunk(uint32_t seq, uint32_t& chunk, uint32_t& n_chunks) {
  uint64_t current = next_chunk_.load(std::memory_order_acquire);
  for (;;) {
    n_chunks = static_cast<uint32_t>(current >> 16) & 0xffff;
    chunk = static_cast<uint32_t>(current) & 0xffff;
    if (static_cast<uint32_t>(current >> 32) != seq || chunk >= n_chunks) return false;
    if (next_chunk_.compare_exchange_weak(current, current + 1, std::memory_order_acq_rel, std::memory_order_acquire))
      return true;
  }
}

void ThreadPool::run_chunks(uint32_t seq, int thread_index) {
  const ActiveJob outer = active_job;
  active_job = {this, thread_index};
  uint32_t chunk = 0, n_chunks = 0;
  while (claim_chunk(seq, chunk, n_chunks)) {
    // Chunk c is grains [G c / C, G (c + 1) / C): sizes differ by at most one grain.
    const int64_t first = job_grains_ * chunk / n_chunks;
    const int64_t last = job_grains_ * (chunk + 1) / n_chunks;
    ChunkObserver* observer = chunk_observer_.load(std::memory_order_relaxed);
    if (observer == nullptr) {
      (*job_fn_)(first * job_grain_, std::min(job_n_, last * job_grain_), thread_index);
    } else {
      const int64_t start_ns = steady_ns();
      (*job_fn_)(first * job_grain_, std::min(job_n_, last * job_grain_), thread_index);
      observer->on_chunk(thread_index, start_ns, steady_ns());
    }
    if (chunks_done_.fetch_add(1, std::memory_order_seq_cst) + 1 == n_chunks &&
        caller_sleeping_.load(std::memory_order_seq_cst))
      chunks_done_.notify_all();
  }
  active_job = outer;
}

uint32_t ThreadPool::wait_for_job(uint32_t seen) {
  auto changed = [&] { return job_seq_.load(std::memory_order_acquire) != seen; };
  if (!spin_then_yield(changed)) {
    sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
    while (job_seq_.load(std::memory_order_seq_cst) == seen) job_seq_.wait(seen, std::memory_order_seq_cst);
    sleeping_workers_.fetch_sub(1, std::memory_order_relaxed);
  }
  return job_seq_.load(std::memory_order_acquire);
}

void ThreadPool::wait_until_done(uint32_t n_chunks) {
  auto done = [&] { return chunks_done_.load(std::memory_order_acquire) == n_chunks; };
  if (spin_then_yield(done)) return;
  caller_sleeping_.store(true, std::memory_order_seq_cst);
  for (;;) {
    const uint32_t finished = chunks_done_.load(std::memory_order_seq_cst);
    if (finished == n_chunks) break;
    chunks_done_.wait(finished, std::memory_order_seq_cst);
  }
  caller_sleeping_.store(false, std::memory_order_relaxed);
}

void ThreadPool::worker_loop(int thread_index) {
  uint32_t seen = 0;
  for (;;) {
    // A worker that slept through several jobs skips to the newest; the claims of the
    // finished ones would fail anyway.
    seen = wait_for_job(seen);
    if (stopping_.load(std::memory_order_acquire)) return;
    run_chunks(seen, thread_index);
  }
}

void ThreadPool::parallel_for(int64_t n, const RangeFn& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t n_grains = (n + grain - 1) / grain;
  if (active_job.pool == this) {  // nested inside one of this pool's chunks
    fn(0, n, active_job.thread_index);
    return;
  }
  if (n_threads_ == 1 || n_grains == 1) {
    fn(0, n, 0);
    return;
  }
  const auto n_chunks = static_cast<uint32_t>(std::min({n_grains, kChunksPerThread * n_threads_, kMaxChunks}));
  job_fn_ = &fn;
  job_n_ = n;
  job_grain_ = grain;
  job_grains_ = n_grains;
  chunks_done_.store(0, std::memory_order_relaxed);
  const uint32_t seq = job_seq_.load(std::memory_order_relaxed) + 1;
  next_chunk_.store(pack(seq, n_chunks, 0), std::memory_order_release);
  job_seq_.store(seq, std::memory_order_seq_cst);
  if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) job_seq_.notify_all();
  run_chunks(seq, 0);
  wait_until_done(n_chunks);
  job_fn_ = nullptr;
}

}  // namespace tandem
