// Streaming-read bandwidth probe (hbm_bandwidth.h). Each thread reads 16-byte lines with a
// grid-stride loop (consecutive threads, consecutive lines: every warp reads 512 contiguous
// bytes per load) and folds them into one word, which the block writes out so the loads
// cannot be optimised away; the output is 4 bytes per block, nothing next to the read.
#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_buffer.h"
#include "backends/cuda/hbm_bandwidth.h"

namespace tandem::cuda {
namespace {

__global__ void read_lines_kernel(const uint4* lines, int64_t n_lines, uint32_t* sink) {
  uint32_t folded = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n_lines; i += stride) {
    const uint4 line = __ldcs(lines + i);  // streaming: do not keep it in L2 for a reuse that never comes
    folded ^= line.x ^ line.y ^ line.z ^ line.w;
  }
  // Folded per warp; lane 0 of the block's first warp writes (the others' words are dropped,
  // but the compiler cannot know their loads were unused).
  for (int offset = 16; offset > 0; offset /= 2) folded ^= __shfl_xor_sync(0xffffffffu, folded, offset);
  if (threadIdx.x % 32 == 0) atomicXor(sink + blockIdx.x, folded);
}

}  // namespace

HbmBandwidth measure_hbm_read_bandwidth(int64_t buffer_bytes, int runs) {
  const int64_t n_lines = buffer_bytes / 16;
  DeviceBuffer<uint4> lines(n_lines);
  // Initialised, so the reads are of real pages (freshly mapped memory may be lazily backed).
  TANDEM_CUDA_CHECK(cudaMemset(lines.data(), 0x5a, static_cast<size_t>(n_lines) * 16));
  int device = 0, multiprocessors = 0;
  TANDEM_CUDA_CHECK(cudaGetDevice(&device));
  TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  // Enough resident warps per SM to keep the memory system's queues full.
  const int threads = 512, blocks = multiprocessors * 4;
  DeviceBuffer<uint32_t> sink(blocks);
  cudaEvent_t start, stop;
  TANDEM_CUDA_CHECK(cudaEventCreate(&start));
  TANDEM_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> rates;
  for (int run = -1; run < runs; ++run) {  // run -1: warm-up, untimed
    TANDEM_CUDA_CHECK(cudaEventRecord(start));
    read_lines_kernel<<<blocks, threads>>>(lines.data(), n_lines, sink.data());
    TANDEM_CUDA_CHECK_LAUNCH();
    TANDEM_CUDA_CHECK(cudaEventRecord(stop));
    TANDEM_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    TANDEM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (run >= 0) rates.push_back(static_cast<double>(n_lines) * 16.0 / (ms * 1e-3) / 1e9);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  HbmBandwidth result;
  result.buffer_bytes = n_lines * 16;
  result.runs = runs;
  if (!rates.empty()) {
    std::sort(rates.begin(), rates.end());
    result.best_gb_per_s = rates.back();
    result.median_gb_per_s = rates[rates.size() / 2];
  }
  return result;
}

}  // namespace tandem::cuda
