// CudaForward: a dense Llama-family model's forward pass on the device, over the kernels of
// this folder. Weights are uploaded once, in their file's block formats (Q/K/V and gate/up
// concatenated when they share a type: one matmul each); the KV cache lives in device memory
// as a pool of blocks that the Batch's block tables index, as the CPU's KvCache; per layer
// RMSNorm, QKV, RoPE, K/V stored into their slots, paged attention, Wo (+ residual), RMSNorm,
// gate/up, SwiGLU, down (+ residual); logits are computed and copied back only for the rows
// that want them. Layers whose matrices are all F16 or all Q8_0 in whole tiles run them on the
// tensor cores (matmul_f16_mma.h: weights repacked at upload, Q/K/V concatenated, gate/up
// interleaved so SwiGLU is the matmul's epilogue, activations packed f16 by the RMSNorm that
// makes them; 9 launches a layer; TANDEM_CUDA_MMA=0 keeps every matrix on the CUDA-core
// kernels). A step's launches are captured once per (n_tokens, n_logit_rows) into a CUDA
// graph and replayed (TANDEM_CUDA_GRAPHS=0: plain launches); everything else a step changes
// is read from device memory. Every kernel's per-row arithmetic is independent of the batch,
// so a sequence's logits do not depend on its neighbours or on how it was chunked.
// Not yet chosen by the engine (src/engine is not this backend's): tests drive it directly.
#pragma once

#include <cuda_runtime.h>

#include <initializer_list>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/matmul.h"
#include "backends/cuda/matmul_f16_mma.h"
#include "model/batch.h"
#include "model/model.h"

namespace tandem::cuda {

struct CudaForwardOptions {
  int64_t max_batch_tokens = 512;
  int64_t kv_blocks = 0;  // the device KV pool: blocks of block_size token slots, every layer
  int32_t block_size = 16;
  DType kv_type = DType::F16;  // F16 or F32 (K and V alike)
  // Replay each step shape's launches as a CUDA graph; the environment's TANDEM_CUDA_GRAPHS=0
  // turns this off too (plain launches, the same kernels and results).
  bool cuda_graphs = true;
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
  // valid until the next run() (pinned host memory). Throws InputError for out-of-range
  // tokens, positions, sequences or blocks, or a batch larger than max_batch_tokens.
  std::span<const float> run(const Batch& batch);

  // Empty when the device path runs this model; otherwise the first feature it lacks.
  static std::string unsupported_reason(const Model& model);

  // Device bytes of the uploaded weights and of the KV pool.
  int64_t weight_bytes() const { return weight_bytes_; }
  int64_t kv_bytes() const { return 2 * keys_.size(); }

  // Layers whose matrices run on the tensor cores (F16 or Q8_0 throughout, shapes in whole
  // tiles, TANDEM_CUDA_MMA not 0): tests check the path taken.
  int64_t mma_layers() const {
    int64_t n = 0;
    for (const Layer& layer : layers_) n += layer.mma ? 1 : 0;
    return n;
  }

  // Steps run by replaying a CUDA graph so far (0 with graphs off): tests check the path taken.
  int64_t graph_replays() const { return graph_replays_; }
  // Why graphs went off after the runtime refused a capture (the steps since ran as plain
  // launches); empty while they are on, or when the options or environment turned them off.
  const std::string& graphs_off_reason() const { return graphs_off_reason_; }

 private:
  // Matrices that read the same input and write adjacent columns of one output row
  // ([n_tokens, n_rows]): one concatenated matrix when they share a type, else each in turn.
  struct FusedMatrix {
    std::vector<DeviceMatrix> parts;
    int64_t n_rows = 0;
  };
  // A matrix in the tensor-core layout (f16_mma_layout.h): F16 or Q8_0, repacked at upload.
  struct MmaMatrix {
    const void* data = nullptr;
    DType type = DType::F16;
    int64_t n_rows = 0, n_cols = 0;
  };
  struct Layer {
    FusedMatrix qkv;      // wq, wk, wv: [q_width + 2 * kv_width, d_model]
    FusedMatrix gate_up;  // w_gate, w_up: [2 * d_ff, d_model]
    DeviceMatrix wo, w_down;
    // When `mma`, the layer's matrices are these instead (the ones above are not uploaded):
    // qkv concatenated, gate/up interleaved in 8s (MmaOutput::SwiGluPacked), activations
    // packed f16 between them.
    bool mma = false;
    MmaMatrix qkv_mma, wo_mma, gate_up_mma, down_mma;
    const float* attn_norm = nullptr;
    const float* ffn_norm = nullptr;
  };
  // Byte offsets of a step's inputs in step_inputs_ (and its pinned host twin), a function of
  // n_tokens alone, so a captured graph's pointers stay valid for every batch of its shape;
  // the block tables come last, [n_sequences, max_blocks_per_sequence_].
  struct StepLayout {
    size_t positions, seq_ids, slots, logit_indices, hidden, block_tables;
  };
  struct PinnedDeleter {
    void operator()(void* p) const;
  };
  struct CachedGraph {
    cudaGraphExec_t exec = nullptr;
    uint64_t last_used = 0;
  };

  DeviceMatrix upload_matrix(const TensorView& view);
  DeviceMatrix upload_rows(const uint8_t* rows, DType type, int64_t n_rows, int64_t n_cols);
  FusedMatrix upload_fused(std::initializer_list<const TensorView*> views);
  // The views' rows (one type; `interleave_gate_up`: two views, rows interleaved in 8s) packed
  // for the tensor cores.
  MmaMatrix upload_mma(std::initializer_list<const TensorView*> views, bool interleave_gate_up);
  const float* upload_vector(const TensorView& view);
  StepLayout step_layout(int64_t n_tokens) const;
  void prepare_batch(const Batch& batch);
  void matmul_fused(const FusedMatrix& m, const float* x, int64_t n_tokens, float* out);
  // A tensor-core matmul on this forward's stream: packed_x is n_tokens packed f16 rows.
  void run_mma(const MmaMatrix& m, const uint16_t* packed_x, int64_t n_tokens, const MmaEpilogue& epilogue);
  void launch_step(int64_t n_tokens, int64_t n_logit_rows);
  cudaGraphExec_t capture_step(int64_t n_tokens, int64_t n_logit_rows);
  void run_step_graph(int64_t n_tokens, int64_t n_logit_rows);

  std::shared_ptr<const Model> model_;
  bool use_mma_ = true;   // TANDEM_CUDA_MMA=0: every matrix on the CUDA-core kernels
  MmaMatrix output_mma_;  // the output head in the tensor-core layout (data null: output_)
  CudaForwardOptions options_;
  bool use_graphs_ = true;
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
  // The most blocks one sequence can use (its whole context, bounded by the pool): the block
  // tables' row stride, fixed so that it is not a kernel argument that changes per step.
  int64_t max_blocks_per_sequence_ = 0;
  // A step's inputs (hidden rows, positions, sequence ids, slots, logit rows, block tables)
  // staged in pinned host memory and copied in one transfer; device scratch for
  // max_batch_tokens.
  std::unique_ptr<void, PinnedDeleter> step_inputs_host_;
  DeviceBuffer<uint8_t> step_inputs_;
  size_t step_input_bytes_ = 0;                 // this step's transfer
  DeviceBuffer<uint16_t> packed_, packed_ffn_;  // packed f16 activations (matmul_f16_mma.h)
  DeviceBuffer<float> normed_, qkv_, attn_, gate_up_, ffn_, logit_rows_, logits_;
  std::vector<uint8_t> embedding_row_;
  int64_t n_logit_rows_ = 0;
  std::unique_ptr<void, PinnedDeleter> logits_host_;  // [max_batch_tokens, vocab_size] f32, pinned
  // Instantiated graphs by (n_tokens, n_logit_rows), the least recently used dropped past
  // kMaxCachedGraphs.
  std::map<std::pair<int64_t, int64_t>, CachedGraph> graphs_;
  uint64_t steps_ = 0;
  int64_t graph_replays_ = 0;
  std::string graphs_off_reason_;
};

}  // namespace tandem::cuda
