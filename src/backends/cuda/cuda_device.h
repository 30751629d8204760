// Which CUDA device this process would use (device 0) and what it is: name, compute
// capability, memory. Finding none is an answer, not an error: `why_not` says what the
// runtime said (no driver, no device), for `tandem info --device` and --device's refusal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tandem::cuda {

struct CudaDeviceInfo {
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int multiprocessors = 0;
};

// Device 0, or nullopt with *why_not = "no CUDA device: <the runtime's reason>".
std::optional<CudaDeviceInfo> find_cuda_device(std::string* why_not);

}  // namespace tandem::cuda
