// CudaStepForward: the Engine's step forward pass (engine.h's StepForward) on CudaForward, so
// that run, chat and serve generate on the GPU (--device cuda). The engine keeps doing block
// allocation, prefix caching and block tables on the host; the device pool has the same number
// of blocks of the same size, so its block tables index the device pool unchanged. The host
// KvCache then holds no K/V bytes (KvStorage::None). Sampling stays on the host.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "backends/cuda/cuda_forward.h"
#include "engine/engine.h"

namespace tandem::cuda {

// Empty when an Engine with this model and config can run its steps on CudaForward; otherwise
// the first thing it lacks, in a few words: a model feature (CudaForward::unsupported_reason),
// a KV type other than f16 or f32 for K and V alike, a draft model.
std::string cuda_engine_unsupported_reason(const Model& model, const EngineConfig& config);

class CudaStepForward final : public StepForward {
 public:
  // A device KV pool of n_blocks blocks of config.block_size slots in config.kv_types, batches of
  // up to config.max_batch_tokens. Throws InputError when cuda_engine_unsupported_reason is not
  // empty, CudaError when the device cannot hold the weights, the pool or the scratch.
  CudaStepForward(std::shared_ptr<const Model> model, const EngineConfig& config, int64_t n_blocks);

  // The logits rows of the batch's wants_logits tokens (host memory); `local` and `cache` (the
  // host's, without storage) are not touched.
  std::span<const float> run(Forward& local, const Batch& batch, KvCache& cache) override;

  const CudaForward& forward() const { return forward_; }

 private:
  int64_t n_blocks_;
  int32_t block_size_;
  CudaForward forward_;
};

// EngineConfig::device_forward for CUDA. `required` (--device cuda): a model or config the
// device path does not run is an InputError naming what it lacks; otherwise (--device auto)
// the factory returns null and the engine runs on the CPU.
DeviceForwardFactory cuda_device_forward(bool required);

}  // namespace tandem::cuda
