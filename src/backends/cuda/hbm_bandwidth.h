// The device's measured read bandwidth: a streaming-read kernel over a buffer far larger
// than L2, timed with CUDA events, best of several runs. The ceiling the decode kernels are
// judged against (issue 17: decode at >= 70 % of it), printed by `tandem info --device`.
#pragma once

#include <cstdint>

namespace tandem::cuda {

struct HbmBandwidth {
  int64_t buffer_bytes = 0;
  double best_gb_per_s = 0.0;  // 1e9 bytes/s
  double median_gb_per_s = 0.0;
  int runs = 0;
};

// Reads buffer_bytes (rounded down to 16-byte lines) `runs` times after one untimed run.
// Throws CudaError when the device cannot hold the buffer.
HbmBandwidth measure_hbm_read_bandwidth(int64_t buffer_bytes, int runs);

}  // namespace tandem::cuda
