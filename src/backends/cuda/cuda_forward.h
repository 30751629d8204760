// CudaForward: a dense Llama-family model's forward pass on the device, over the kernels of
// this folder. Weights are uploaded once, in their file's block formats; the KV cache lives in
// device memory as a pool of blocks that the Batch's block tables index, as the CPU's
// KvCache; per layer RMSNorm, Q/K/V, RoPE, K/V stored into their slots, paged attention, Wo,
// residual, RMSNorm, gate/up, SwiGLU, down, residual; logits are computed and copied back
// only for the rows that want them. Every kernel's per-row arithmetic is independent of the
// batch, so a sequence's logits do not depend on its neighbours or on how it was chunked.
// Not yet chosen by the engine (src/engine is not this backend's): tests drive it directly.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/matmul.h"
#include "model/batch.h"
#include "model/model.h"

namespace tandem::cuda {

struct CudaForwardOptions {
  int64_t max_batch_tokens = 512;
  int64_t kv_blocks = 0;  // the device KV pool: blocks of block_size token slots, every layer
  int32_t block_size = 16;
  DType kv_type = DType::F16;  // F16 or F32 (K and V alike)
};

class CudaForward {
 public:
  // Throws InputError naming what the device path lacks for this model (unsupported_reason),
  // CudaError when the device cannot hold the weights, the cache or the scratch.
  CudaForward(std::shared_ptr<const Model> model, const CudaForwardOptions& options);
  ~CudaForward();
  CudaForward(const CudaForward&) = delete;
  CudaForward& operator=(const CudaForward&) = delete;

  // Runs the batch (block tables index the device pool, 0..kv_blocks-1). Returns
  // [n_logit_rows, vocab_size] on the host, rows in batch order of tokens with wants_logits;
  // valid until the next run(). Throws InputError for out-of-range tokens, positions,
  // sequences or blocks, or a batch larger than max_batch_tokens.
  std::span<const float> run(const Batch& batch);

  // Empty when the device path runs this model; otherwise the first feature it lacks.
  static std::string unsupported_reason(const Model& model);

  // Device bytes of the uploaded weights and of the KV pool.
  int64_t weight_bytes() const { return weight_bytes_; }
  int64_t kv_bytes() const { return 2 * keys_.size(); }

 private:
  struct Layer {
    DeviceMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
  };

  DeviceMatrix upload_matrix(const TensorView& view);
  const float* upload_vector(const TensorView& view);
  void prepare_batch(const Batch& batch);

  std::shared_ptr<const Model> model_;
  CudaForwardOptions options_;
  cudaStream_t stream_ = nullptr;
  int64_t weight_bytes_ = 0;
  std::vector<DeviceBuffer<uint8_t>> weight_storage_;
  std::vector<DeviceBuffer<float>> vector_storage_;
  std::vector<Layer> layers_;
  DeviceMatrix output_;
  const float* output_norm_ = nullptr;
  DeviceBuffer<float> rope_freq_factors_;  // empty: none
  int64_t kv_row_bytes_ = 0;
  DeviceBuffer<uint8_t> keys_;    // [n_layers, n_slots, kv_row_bytes]
  DeviceBuffer<uint8_t> values_;  // [n_layers, n_slots, kv_row_bytes]
  // Device scratch for max_batch_tokens.
  DeviceBuffer<float> hidden_, normed_, q_, k_, v_, attn_, gate_, up_, logit_rows_, logits_;
  DeviceBuffer<int32_t> positions_, seq_ids_, slots_, logit_indices_, block_tables_;
  // Host staging of the same.
  std::vector<uint8_t> embedding_row_;
  std::vector<float> hidden_host_;
  std::vector<int32_t> slots_host_, logit_indices_host_, block_tables_host_;
  int64_t max_blocks_in_batch_ = 0;
  std::vector<float> logits_host_;
};

}  // namespace tandem::cuda
