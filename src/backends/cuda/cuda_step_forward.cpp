// The Engine's steps on CudaForward (cuda_step_forward.h): what of an engine the device path
// runs, and the one call per step.
#include "backends/cuda/cuda_step_forward.h"

#include "backends/cuda/cuda_check.h"
#include "base/error.h"
#include "kv/kv_types.h"

namespace tandem::cuda {

std::string cuda_engine_unsupported_reason(const Model& model, const EngineConfig& config) {
  if (std::string reason = CudaForward::unsupported_reason(model); !reason.empty()) return reason;
  const KvTypes& types = config.kv_types;
  if (types.k != types.v || (types.k != DType::F16 && types.k != DType::F32))
    return fmt::format("a {} K / {} V cache (the device KV cache holds f16 or f32, K and V alike)",
                       kv_type_name(types.k), kv_type_name(types.v));
  if (config.draft_model) return "a draft model (its own forward pass and KV cache are the CPU's)";
  return "";
}

CudaStepForward::CudaStepForward(std::shared_ptr<const Model> model, const EngineConfig& config, int64_t n_blocks)
    : n_blocks_(n_blocks),
      block_size_(config.block_size),
      forward_(
          [&] {
            const std::string reason = cuda_engine_unsupported_reason(*model, config);
            TANDEM_CHECK_INPUT(reason.empty(), "not supported on the GPU yet: {}", reason);
            return model;
          }(),
          CudaForwardOptions{.max_batch_tokens = config.max_batch_tokens,
                             .kv_blocks = n_blocks,
                             .block_size = config.block_size,
                             .kv_type = config.kv_types.k}) {}

std::span<const float> CudaStepForward::run(Forward& /*local*/, const Batch& batch, KvCache& cache) {
  // The engine's block ids are the device pool's: the two pools must have the same shape.
  TANDEM_ASSERT(cache.n_blocks() == n_blocks_ && cache.block_size() == block_size_ && !cache.on_host());
  return forward_.run(batch);
}

DeviceForwardFactory cuda_device_forward(bool required) {
  return [required](const std::shared_ptr<const Model>& model, const EngineConfig& config,
                    int64_t n_blocks) -> std::unique_ptr<StepForward> {
    const std::string reason = cuda_engine_unsupported_reason(*model, config);
    if (!reason.empty()) {
      TANDEM_CHECK_INPUT(!required, "--device cuda: not supported on the GPU yet: {} (use --device cpu)", reason);
      return nullptr;
    }
    try {
      return std::make_unique<CudaStepForward>(model, config, n_blocks);
    } catch (const CudaError& error) {  // e.g. the weights or the KV pool do not fit: the command's one line
      throw InputError(fmt::format("--device cuda: {}", error.what()));
    }
  };
}

}  // namespace tandem::cuda
