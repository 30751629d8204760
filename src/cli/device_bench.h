// `tandem bench --device cuda`: the benchmark tests run on the CUDA forward pass
// (backends/cuda/cuda_benchmark.h), reachable from the CLI whether or not the build has CUDA.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/benchmark.h"
#include "model/model.h"

namespace tandem::cli {

// Empty when the device forward pass runs `model`; otherwise why not (or "built without CUDA").
std::string device_unsupported_reason(const Model& model);

// ppN, tgN and tgN-bB for each B of decode_batches on the device; throws InputError when it
// cannot run them (the reason above), CudaError (a std::runtime_error) on a device failure.
void run_device_benchmark(std::shared_ptr<const Model> model, const BenchOptions& options,
                          const std::vector<int64_t>& decode_batches,
                          const std::function<void(const BenchResult&)>& on_result);

}  // namespace tandem::cli
