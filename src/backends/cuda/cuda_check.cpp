// One line per CUDA failure: the runtime's own words, the call and where it was made.
#include "backends/cuda/cuda_check.h"

#include <fmt/format.h>

namespace tandem::cuda {

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  throw CudaError(fmt::format("CUDA error: {} ({}) in {} at {}:{}", cudaGetErrorString(error), cudaGetErrorName(error),
                              call, file, line));
}

}  // namespace tandem::cuda
