// Device discovery through the CUDA runtime (cuda_device.h).
#include "backends/cuda/cuda_device.h"

#include <cuda_runtime.h>

namespace tandem::cuda {

std::optional<CudaDeviceInfo> find_cuda_device(std::string* why_not) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count == 0) status = cudaErrorNoDevice;
  cudaDeviceProp properties{};
  if (status == cudaSuccess) status = cudaGetDeviceProperties(&properties, 0);
  size_t free_bytes = 0, total_bytes = 0;
  if (status == cudaSuccess) status = cudaSetDevice(0);
  if (status == cudaSuccess) status = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (status != cudaSuccess) {
    if (why_not != nullptr) *why_not = std::string("no CUDA device: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky-free error so later calls report their own
    return std::nullopt;
  }
  CudaDeviceInfo info;
  info.name = properties.name;
  info.compute_major = properties.major;
  info.compute_minor = properties.minor;
  info.total_bytes = static_cast<int64_t>(total_bytes);
  info.free_bytes = static_cast<int64_t>(free_bytes);
  info.multiprocessors = properties.multiProcessorCount;
  return info;
}

}  // namespace tandem::cuda
