// The CUDA forward pass measured as engine/benchmark measures the CPU's, for
// `tandem bench --device cuda`: ppN (one CudaForward::run of N tokens into a fresh pool),
// tgN (N greedy steps of one token after an untimed prefill, argmax on the host) and, for
// each B of decode_batches, tgN-bB: B sequences decoding together, one token each per step
// (tokens/s counts all B). Results in engine/benchmark's BenchResult, so the CLI prints and
// writes JSON for both alike.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "engine/benchmark.h"
#include "model/model.h"

namespace tandem::cuda {

// Throws InputError when the device path does not run the model (CudaForward) or the KV
// types are not F16/F32, CudaError when the device cannot hold it.
std::vector<BenchResult> run_cuda_benchmark(std::shared_ptr<const Model> model, const BenchOptions& options,
                                            const std::vector<int64_t>& decode_batches,
                                            const std::function<void(const BenchResult&)>& on_result);

}  // namespace tandem::cuda
