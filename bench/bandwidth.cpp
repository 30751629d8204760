// tandem_bandwidth: STREAM-style memory read bandwidth — sum a buffer much larger than the
// caches, several passes, with 1 thread and with N threads; reports the best pass in GB/s
// (1e9 bytes/s) as text and as one JSON line. bench/compare divides this by a model's weight
// bytes per token to get the decode floor. Self-contained: no engine code.
//
// usage: tandem_bandwidth [--size-mib 1024] [--passes 5] [--threads N]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Integer sums vectorize without -ffast-math (no reassociation issue), and four independent
// accumulators keep the adds off the critical path, so the loop is bound by memory only.
uint64_t sum_range(const uint64_t* data, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a += data[i];
    b += data[i + 1];
    c += data[i + 2];
    d += data[i + 3];
  }
  for (; i < n; ++i) a += data[i];
  return a + b + c + d;
}

// One pass over the whole buffer split into `threads` contiguous parts; returns seconds.
double timed_pass(const uint64_t* data, size_t n, int threads, uint64_t& checksum) {
  std::vector<uint64_t> partial(static_cast<size_t>(threads) * 8);  // 64 bytes apart: no false sharing
  std::vector<std::thread> workers;
  const Clock::time_point start = Clock::now();
  for (int t = 1; t < threads; ++t)
    workers.emplace_back([&, t] {
      const size_t begin = n * t / threads, end = n * (t + 1) / threads;
      partial[static_cast<size_t>(t) * 8] = sum_range(data + begin, end - begin);
    });
  partial[0] = sum_range(data, n / threads);
  for (std::thread& worker : workers) worker.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (int t = 0; t < threads; ++t) checksum += partial[static_cast<size_t>(t) * 8];
  return seconds;
}

double best_gbps(const uint64_t* data, size_t n, int threads, int passes, uint64_t& checksum) {
  double best = 0.0;
  for (int pass = 0; pass < passes; ++pass) {
    const double seconds = timed_pass(data, n, threads, checksum);
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / seconds / 1e9);
  }
  return best;
}

int int_arg(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "tandem_bandwidth: missing value for %s\n", argv[i]);
    std::exit(1);
  }
  return std::atoi(argv[++i]);
}

}  // namespace

int main(int argc, char** argv) {
  int size_mib = 1024, passes = 5;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--size-mib"))
      size_mib = int_arg(argc, argv, i);
    else if (!std::strcmp(argv[i], "--passes"))
      passes = int_arg(argc, argv, i);
    else if (!std::strcmp(argv[i], "--threads"))
      threads = int_arg(argc, argv, i);
    else {
      std::fprintf(stderr, "usage: tandem_bandwidth [--size-mib 1024] [--passes 5] [--threads N]\n");
      return 1;
    }
  }
  if (size_mib < 1 || passes < 1 || threads < 1) {
    std::fprintf(stderr, "tandem_bandwidth: sizes, passes and threads must be positive\n");
    return 1;
  }
  const size_t n = static_cast<size_t>(size_mib) * 1024 * 1024 / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buffer(new uint64_t[n]);
  // Writing every element first faults all pages in, so no pass times page faults.
  for (size_t i = 0; i < n; ++i) buffer[i] = i;

  uint64_t checksum = 0;
  const double one = best_gbps(buffer.get(), n, 1, passes, checksum);
  const double many = threads > 1 ? best_gbps(buffer.get(), n, threads, passes, checksum) : one;
  std::printf("read bandwidth: %.2f GB/s with 1 thread, %.2f GB/s with %d threads (%d MiB, best of %d passes)\n", one,
              many, threads, size_mib, passes);
  // The checksum is printed so the compiler cannot drop the sums.
  std::printf("{\"test\": \"read_bandwidth\", \"bytes\": %zu, \"passes\": %d, \"threads\": %d, "
              "\"gbps_1_thread\": %.3f, \"gbps_n_threads\": %.3f, \"checksum\": %llu}\n",
              n * sizeof(uint64_t), passes, threads, one, many, static_cast<unsigned long long>(checksum));
  return 0;
}
