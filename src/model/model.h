// Model: an immutable Llama-family model — config plus weight views — and the storage that
// backs the views (a memory map, or buffers for converted/loaded-in-memory weights).
// State (KV cache, scratch, RNG) is never kept here; it is passed to the forward pass.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/tensor_view.h"
#include "model/model_config.h"

namespace tandem {

class MappedFile;  // io/mapped_file.h

struct LayerWeights {
  TensorView attn_norm;  // [d_model] f32
  TensorView wq;         // [n_heads * head_dim, d_model]
  TensorView wk;         // [n_kv_heads * head_dim, d_model]
  TensorView wv;         // [n_kv_heads * head_dim, d_model]
  TensorView wo;         // [d_model, n_heads * head_dim]
  TensorView ffn_norm;   // [d_model] f32
  TensorView w_gate;     // [d_ff, d_model]; null in a layer with experts
  TensorView w_up;       // [d_ff, d_model]
  TensorView w_down;     // [d_model, d_ff]
  // Mixture of experts (ModelConfig::n_experts > 0): the router and each expert's matrices, one
  // 2-D view per expert (a slice of the file's stacked [n_experts, rows, cols] tensor, or HF's
  // own per-expert tensor), so every kernel sees plain matrices. Empty in a dense layer.
  TensorView router;                    // [n_experts, d_model] (ffn_gate_inp)
  std::vector<TensorView> expert_gate;  // [n_experts] of [d_ff_expert, d_model]
  std::vector<TensorView> expert_up;    // [n_experts] of [d_ff_expert, d_model]
  std::vector<TensorView> expert_down;  // [n_experts] of [d_model, d_ff_expert]
  // Optional projection biases (Qwen2), f32; data is null when the model has none.
  TensorView bq;  // [n_heads * head_dim]
  TensorView bk;  // [n_kv_heads * head_dim]
  TensorView bv;  // [n_kv_heads * head_dim]
  // Optional per-head Q/K RMSNorm weights (Qwen3), f32; data is null when the model has none.
  TensorView q_norm;  // [head_dim]
  TensorView k_norm;  // [head_dim]
  // Gemma's RMSNorms of the attention and FFN outputs before the residual add, f32; null otherwise.
  TensorView post_attn_norm;  // [d_model]
  TensorView post_ffn_norm;   // [d_model]
  // gpt-oss, f32; data null otherwise: the output projection's bias, each query head's sink
  // logit (ModelConfig::attention_sinks), the router's bias and each expert's projection biases.
  TensorView bo;                             // [d_model]
  TensorView sinks;                          // [n_heads]
  TensorView router_bias;                    // [n_experts]
  std::vector<TensorView> expert_gate_bias;  // [n_experts] of [d_ff_expert]
  std::vector<TensorView> expert_up_bias;    // [n_experts] of [d_ff_expert]
  std::vector<TensorView> expert_down_bias;  // [n_experts] of [d_model]
};

struct ModelWeights {
  TensorView token_embedding;  // [vocab_size, d_model]
  std::vector<LayerWeights> layers;
  TensorView output_norm;  // [d_model] f32
  TensorView output;       // [vocab_size, d_model]; aliases token_embedding when tied
};

// Layers [first, end) of a model: one pipeline stage's share (model/pipeline_stage.h).
struct LayerRange {
  int64_t first = 0;
  int64_t end = 0;
  int64_t size() const { return end - first; }
};

// One rank's share of a tensor-parallel model (model/tensor_slice.h): rank `rank` of `size`.
struct TensorSlice {
  int64_t rank = 0;
  int64_t size = 1;
};

struct ModelLoadOptions {
  // Hold only these layers' weights, as a pipeline stage (model/pipeline_stage.h); unset: all.
  std::optional<LayerRange> layers{};
  // Hold only this rank's slice of every layer (tensor parallelism, model/tensor_slice.h); unset: all.
  std::optional<TensorSlice> tensor_slice{};
};

struct Model {
  // The whole model's, whatever the stage holds; under tensor parallelism (tensor_slice) the
  // rank's share: its query and KV heads (n_heads, n_kv_heads) and FFN width (d_ff).
  ModelConfig config;
  ModelWeights weights;
  std::string source_path;
  std::string format;  // "gguf", "llama2.c" or "safetensors"
  // Keeps whatever backs the views alive (a MappedFile, owned float buffers, ...).
  std::vector<std::shared_ptr<const void>> storage;
  // Set when weights.token_embedding lies in a file map (held by storage): rows are then
  // read from the file (MappedFile::read) rather than touched through the map.
  const MappedFile* embedding_file = nullptr;
  // Set when loaded as a pipeline stage: the layers whose weights it holds. weights.layers
  // keeps n_layers entries, indexed by layer; those outside the range are empty.
  std::optional<LayerRange> stage;
  // Set when loaded as one rank of a tensor-parallel job: the weights are this rank's slices,
  // and Forward sums the row-parallel outputs over the ranks (Forward::set_partial_sums).
  std::optional<TensorSlice> tensor_slice;
  // Bytes of the buffer pack_weights_for_kernels moved the weights into (0: none).
  int64_t packed_bytes = 0;

  LayerRange held_layers() const { return stage ? *stage : LayerRange{0, config.n_layers}; }
  bool holds_embedding() const { return held_layers().first == 0; }
  bool holds_head() const { return held_layers().end == config.n_layers; }
  // The KV cache a forward pass over this model needs: its held layers only.
  KvShape kv_shape() const {
    KvShape shape = config.kv_shape();
    shape.n_layers = held_layers().size();
    return shape;
  }

  // Bytes read from weights per decoded token (every matrix once, of a layer's experts the
  // n_experts_used a token runs; embeddings one row).
  int64_t weight_bytes_per_token() const;
  // Total bytes of all weight tensors held (tied output counted once).
  int64_t weight_bytes_total() const;
};

// Bytes of one layer's weight tensors (0 for a layer a stage does not hold).
int64_t layer_weight_bytes(const LayerWeights& layer);

// Loads a GGUF (`.gguf`), a Hugging Face model folder (a directory) or a llama2.c checkpoint
// (anything else) into a Model.
// Throws InputError with one line naming the file and the problem (a layer range outside
// the model's layers, or one asked of a Hugging Face folder, which loads whole, included).
std::shared_ptr<const Model> load_model(const std::string& path, const ModelLoadOptions& options = {});
std::shared_ptr<const Model> load_gguf_model(const std::string& path, const ModelLoadOptions& options = {});
std::shared_ptr<const Model> load_llama2c_model(const std::string& path, const ModelLoadOptions& options = {});
// `dir` holds config.json and model.safetensors (or model.safetensors.index.json + shards).
std::shared_ptr<const Model> load_hf_model(const std::string& dir, const ModelLoadOptions& options = {});

// The configuration alone, as load_model would give it, with no weight read or checked: a
// GGUF's metadata (and its small rope_freqs vector), a llama2.c header, a config.json. For
// what needs the shape before (or instead of) weights: a pipeline's layer split, the front of
// a disaggregated job. The same InputErrors as load_model for a bad header or metadata.
ModelConfig read_model_config(const std::string& path);
ModelConfig read_gguf_config(const std::string& path);
ModelConfig read_llama2c_config(const std::string& path);
ModelConfig read_hf_config(const std::string& dir);

}  // namespace tandem
