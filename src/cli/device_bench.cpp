// The CLI's bridge to the device benchmark (device_bench.h): the one place bench asks whether
// the build has CUDA.
#include "cli/device_bench.h"

#include "base/error.h"

#if defined(TANDEM_WITH_CUDA)
#include "backends/cuda/cuda_benchmark.h"
#include "backends/cuda/cuda_forward.h"
#endif

namespace tandem::cli {

std::string device_unsupported_reason(const Model& model) {
#if defined(TANDEM_WITH_CUDA)
  return cuda::CudaForward::unsupported_reason(model);
#else
  return "built without CUDA";
#endif
}

void run_device_benchmark(std::shared_ptr<const Model> model, const BenchOptions& options,
                          const std::vector<int64_t>& decode_batches,
                          const std::function<void(const BenchResult&)>& on_result) {
  const std::string reason = device_unsupported_reason(*model);
  TANDEM_CHECK_INPUT(reason.empty(), "--device cuda: the CUDA forward pass does not run this model: {}", reason);
#if defined(TANDEM_WITH_CUDA)
  cuda::run_cuda_benchmark(std::move(model), options, decode_batches, on_result);
#endif
}

}  // namespace tandem::cli
