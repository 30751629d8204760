// Checks on CUDA runtime calls. A failing call (no device, out of device memory, a launch
// that did not run) ends the operation with CudaError naming the call and the runtime's
// reason in one line, which the CLI prints like any other error; it never aborts.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>

namespace tandem::cuda {

class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);

}  // namespace tandem::cuda

#define TANDEM_CUDA_CHECK(call)                                                        \
  do {                                                                                 \
    const cudaError_t tandem_cuda_status = (call);                                     \
    if (tandem_cuda_status != cudaSuccess)                                             \
      ::tandem::cuda::throw_cuda_error(tandem_cuda_status, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: a bad configuration is reported by cudaGetLastError, not the launch.
#define TANDEM_CUDA_CHECK_LAUNCH() TANDEM_CUDA_CHECK(cudaGetLastError())
