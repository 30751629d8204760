// The device forward pass (cuda_forward.h): the same order of operations as model/forward.cpp
// for a dense Llama block, each step one kernel launch on this forward's stream.
#include "backends/cuda/cuda_forward.h"

#include <algorithm>

#include "backends/cuda/block_dequant.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/forward_kernels.h"
#include "backends/cuda/paged_attention.h"
#include "base/error.h"
#include "base/quant.h"
#include "io/mapped_file.h"

namespace tandem::cuda {
namespace {

std::string matrix_problem(const char* name, const TensorView& view) {
  if (view.data == nullptr) return fmt::format("{} is missing", name);
  if (!cuda_weight_type_supported(view.dtype))
    return fmt::format("{} is {}, a type the device matmul does not take", name, dtype_name(view.dtype));
  if (view.row_length() % cuda_block_elements(view.dtype) != 0)
    return fmt::format("{} rows of {} are not whole {} blocks", name, view.row_length(), dtype_name(view.dtype));
  return "";
}

}  // namespace

std::string CudaForward::unsupported_reason(const Model& model) {
  const ModelConfig& c = model.config;
  if (model.stage) return "a pipeline stage (the device path runs whole models)";
  if (c.has_experts()) return "mixture-of-experts layers";
  if (c.qk_norm) return "per-head Q/K norms (Qwen3)";
  if (c.gemma_blocks) return "Gemma blocks";
  if (c.sliding_window > 0) return "sliding-window attention";
  if (c.attention_scale != 0.0f || c.attn_logit_softcap > 0.0f || c.final_logit_softcap > 0.0f)
    return "a custom attention scale or logit soft-capping";
  if (c.attention_sinks) return "attention sinks";
  if (c.rope_scaling.type != RopeScalingType::None) return "RoPE scaling (linear, YaRN, LongRoPE)";
  if (c.head_dim > kMaxAttentionHeadDim || c.n_kv_heads == 0 || c.n_heads / c.n_kv_heads > kMaxAttentionGroup)
    return fmt::format("{} heads of {} over {} KV heads (the attention kernel takes head_dim <= {}, groups <= {})",
                       c.n_heads, c.head_dim, c.n_kv_heads, kMaxAttentionHeadDim, kMaxAttentionGroup);
  for (const LayerWeights& layer : model.weights.layers) {
    if (layer.bq.data != nullptr || layer.bk.data != nullptr || layer.bv.data != nullptr || layer.bo.data != nullptr)
      return "projection biases";
    for (const auto& [name, view] : {std::pair<const char*, const TensorView&>{"attn_q", layer.wq},
                                     {"attn_k", layer.wk},
                                     {"attn_v", layer.wv},
                                     {"attn_output", layer.wo},
                                     {"ffn_gate", layer.w_gate},
                                     {"ffn_up", layer.w_up},
                                     {"ffn_down", layer.w_down}}) {
      const std::string problem = matrix_problem(name, view);
      if (!problem.empty()) return problem;
    }
  }
  return matrix_problem("output", model.weights.output);
}

CudaForward::CudaForward(std::shared_ptr<const Model> model, const CudaForwardOptions& options)
    : model_(std::move(model)), options_(options) {
  const std::string reason = unsupported_reason(*model_);
  TANDEM_CHECK_INPUT(reason.empty(), "the CUDA forward pass does not run this model: {}", reason);
  TANDEM_CHECK_INPUT(options.kv_type == DType::F16 || options.kv_type == DType::F32,
                     "the device KV cache holds f16 or f32, not {}", dtype_name(options.kv_type));
  TANDEM_CHECK_INPUT(options.max_batch_tokens > 0 && options.kv_blocks > 0 && options.block_size > 0,
                     "CUDA forward: batch of {} tokens, {} KV blocks of {} must all be positive",
                     options.max_batch_tokens, options.kv_blocks, options.block_size);
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  for (const LayerWeights& layer : w.layers) {
    Layer device;
    device.attn_norm = upload_vector(layer.attn_norm);
    device.ffn_norm = upload_vector(layer.ffn_norm);
    device.wq = upload_matrix(layer.wq);
    device.wk = upload_matrix(layer.wk);
    device.wv = upload_matrix(layer.wv);
    device.wo = upload_matrix(layer.wo);
    device.w_gate = upload_matrix(layer.w_gate);
    device.w_up = upload_matrix(layer.w_up);
    device.w_down = upload_matrix(layer.w_down);
    layers_.push_back(device);
  }
  output_norm_ = upload_vector(w.output_norm);
  output_ = upload_matrix(w.output);
  if (!c.rope_freq_factors.empty())
    rope_freq_factors_ =
        DeviceBuffer<float>(c.rope_freq_factors.data(), static_cast<int64_t>(c.rope_freq_factors.size()));

  const int64_t n_slots = options.kv_blocks * options.block_size;
  kv_row_bytes_ = dtype_row_bytes(options.kv_type, c.kv_width());
  keys_ = DeviceBuffer<uint8_t>(c.n_layers * n_slots * kv_row_bytes_);
  values_ = DeviceBuffer<uint8_t>(c.n_layers * n_slots * kv_row_bytes_);

  const int64_t t = options.max_batch_tokens;
  hidden_ = DeviceBuffer<float>(t * c.d_model);
  normed_ = DeviceBuffer<float>(t * c.d_model);
  q_ = DeviceBuffer<float>(t * c.q_width());
  k_ = DeviceBuffer<float>(t * c.kv_width());
  v_ = DeviceBuffer<float>(t * c.kv_width());
  attn_ = DeviceBuffer<float>(t * c.q_width());
  gate_ = DeviceBuffer<float>(t * c.d_ff);
  up_ = DeviceBuffer<float>(t * c.d_ff);
  logit_rows_ = DeviceBuffer<float>(t * c.d_model);
  logits_ = DeviceBuffer<float>(t * c.vocab_size);
  positions_ = DeviceBuffer<int32_t>(t);
  seq_ids_ = DeviceBuffer<int32_t>(t);
  slots_ = DeviceBuffer<int32_t>(t);
  logit_indices_ = DeviceBuffer<int32_t>(t);
  // A sequence of the batch holds at most every block of the pool.
  block_tables_ = DeviceBuffer<int32_t>(t * options.kv_blocks);
  embedding_row_.resize(static_cast<size_t>(w.token_embedding.row_bytes()));
  hidden_host_.resize(static_cast<size_t>(t * c.d_model));
  // The uploads above went through the legacy default stream, which a non-blocking stream does
  // not wait for (and a pageable cudaMemcpy may return before its DMA lands): wait here.
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  // Last: nothing after it can throw, so the destructor always runs on a created stream.
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaForward::~CudaForward() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

DeviceMatrix CudaForward::upload_matrix(const TensorView& view) {
  const int64_t bytes = view.n_rows() * view.row_bytes();
  weight_storage_.emplace_back(static_cast<const uint8_t*>(view.data), bytes);
  weight_bytes_ += bytes;
  return {weight_storage_.back().data(), view.dtype, view.n_rows(), view.row_length(), view.row_bytes()};
}

const float* CudaForward::upload_vector(const TensorView& view) {
  std::vector<float> values(static_cast<size_t>(view.n_elements()));
  dequantize_row(view.dtype, view.data, values.data(), view.n_elements());
  vector_storage_.emplace_back(values);
  weight_bytes_ += view.n_elements() * static_cast<int64_t>(sizeof(float));
  return vector_storage_.back().data();
}

// Checks the batch as the CPU forward does, embeds its tokens on the host (a row each: the
// table stays in host memory) and maps positions to slots through the block tables.
void CudaForward::prepare_batch(const Batch& batch) {
  const ModelConfig& c = model_->config;
  const TensorView& embedding = model_->weights.token_embedding;
  const int64_t n_tokens = batch.n_tokens(), d = c.d_model, block_size = options_.block_size;
  TANDEM_CHECK_INPUT(n_tokens > 0 && n_tokens <= options_.max_batch_tokens, "batch of {} tokens (allowed 1..{})",
                     n_tokens, options_.max_batch_tokens);
  TANDEM_CHECK_INPUT(batch.n_sequences() <= options_.max_batch_tokens, "a batch of {} sequences (allowed up to {})",
                     batch.n_sequences(), options_.max_batch_tokens);
  max_blocks_in_batch_ = 1;
  for (const std::vector<int32_t>& table : batch.block_tables)
    max_blocks_in_batch_ = std::max<int64_t>(max_blocks_in_batch_, static_cast<int64_t>(table.size()));
  TANDEM_CHECK_INPUT(max_blocks_in_batch_ <= options_.kv_blocks, "a block table of {} blocks (the pool has {})",
                     max_blocks_in_batch_, options_.kv_blocks);
  block_tables_host_.assign(static_cast<size_t>(batch.n_sequences() * max_blocks_in_batch_), 0);
  for (int32_t s = 0; s < batch.n_sequences(); ++s) {
    const std::vector<int32_t>& table = batch.block_tables[static_cast<size_t>(s)];
    for (size_t b = 0; b < table.size(); ++b) {
      TANDEM_CHECK_INPUT(table[b] >= 0 && table[b] < options_.kv_blocks, "KV block {} is outside the pool of {} blocks",
                         table[b], options_.kv_blocks);
      block_tables_host_[static_cast<size_t>(s * max_blocks_in_batch_) + b] = table[b];
    }
  }
  slots_host_.resize(static_cast<size_t>(n_tokens));
  logit_indices_host_.clear();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int32_t token = batch.tokens[t], position = batch.positions[t], seq = batch.seq_ids[t];
    TANDEM_CHECK_INPUT(token >= 0 && token < c.vocab_size, "token id {} is outside the vocabulary (0..{})", token,
                       c.vocab_size - 1);
    TANDEM_CHECK_INPUT(position >= 0 && position < c.context_length, "position {} is outside the context (0..{})",
                       position, c.context_length - 1);
    TANDEM_CHECK_INPUT(seq >= 0 && seq < batch.n_sequences(),
                       "sequence id {} is out of range (the batch has {} sequences)", seq, batch.n_sequences());
    const std::vector<int32_t>& table = batch.block_tables[static_cast<size_t>(seq)];
    TANDEM_CHECK_INPUT(position / block_size < static_cast<int64_t>(table.size()),
                       "position {} of sequence {} is past its {} KV blocks", position, seq, table.size());
    slots_host_[static_cast<size_t>(t)] =
        static_cast<int32_t>(table[static_cast<size_t>(position / block_size)] * block_size + position % block_size);
    const void* row = embedding.row(token);
    if (model_->embedding_file != nullptr) {
      model_->embedding_file->read(row, embedding_row_.size(), embedding_row_.data());
      row = embedding_row_.data();
    }
    dequantize_row(embedding.dtype, row, hidden_host_.data() + t * d, d);
    if (batch.wants_logits[t] != 0) logit_indices_host_.push_back(static_cast<int32_t>(t));
  }
  auto copy = [&](void* device, const void* host, size_t bytes) {
    if (bytes > 0) TANDEM_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  };
  copy(hidden_.data(), hidden_host_.data(), static_cast<size_t>(n_tokens * d) * sizeof(float));
  copy(positions_.data(), batch.positions.data(), static_cast<size_t>(n_tokens) * sizeof(int32_t));
  copy(seq_ids_.data(), batch.seq_ids.data(), static_cast<size_t>(n_tokens) * sizeof(int32_t));
  copy(slots_.data(), slots_host_.data(), slots_host_.size() * sizeof(int32_t));
  copy(logit_indices_.data(), logit_indices_host_.data(), logit_indices_host_.size() * sizeof(int32_t));
  copy(block_tables_.data(), block_tables_host_.data(), block_tables_host_.size() * sizeof(int32_t));
}

std::span<const float> CudaForward::run(const Batch& batch) {
  prepare_batch(batch);
  const ModelConfig& c = model_->config;
  const int64_t n_tokens = batch.n_tokens(), d = c.d_model;
  const int64_t n_slots = options_.kv_blocks * options_.block_size;
  const bool half_split = c.rope_pairing == RopePairing::HalfSplit;
  const float* freq_factors = rope_freq_factors_.size() > 0 ? rope_freq_factors_.data() : nullptr;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    uint8_t* layer_keys = keys_.data() + static_cast<int64_t>(l) * n_slots * kv_row_bytes_;
    uint8_t* layer_values = values_.data() + static_cast<int64_t>(l) * n_slots * kv_row_bytes_;
    rmsnorm(hidden_.data(), layer.attn_norm, n_tokens, d, c.rms_norm_eps, normed_.data(), stream_);
    matmul(layer.wq, normed_.data(), n_tokens, q_.data(), stream_);
    matmul(layer.wk, normed_.data(), n_tokens, k_.data(), stream_);
    matmul(layer.wv, normed_.data(), n_tokens, v_.data(), stream_);
    rope(q_.data(), n_tokens, c.q_width(), c.n_heads, c.head_dim, c.rope_dims, positions_.data(), c.rope_freq_base,
         freq_factors, half_split, stream_);
    rope(k_.data(), n_tokens, c.kv_width(), c.n_kv_heads, c.head_dim, c.rope_dims, positions_.data(), c.rope_freq_base,
         freq_factors, half_split, stream_);
    store_rows(k_.data(), n_tokens, c.kv_width(), slots_.data(), options_.kv_type, layer_keys, kv_row_bytes_, stream_);
    store_rows(v_.data(), n_tokens, c.kv_width(), slots_.data(), options_.kv_type, layer_values, kv_row_bytes_,
               stream_);
    const PagedKv kv{layer_keys,       layer_values,        kv_row_bytes_,        kv_row_bytes_,
                     options_.kv_type, options_.block_size, block_tables_.data(), max_blocks_in_batch_};
    paged_attention(q_.data(), c.q_width(), n_tokens, c.n_heads, c.n_kv_heads, c.head_dim, positions_.data(),
                    seq_ids_.data(), kv, attn_.data(), c.q_width(), stream_);
    matmul(layer.wo, attn_.data(), n_tokens, normed_.data(), stream_);
    add_in_place(hidden_.data(), normed_.data(), n_tokens * d, stream_);
    rmsnorm(hidden_.data(), layer.ffn_norm, n_tokens, d, c.rms_norm_eps, normed_.data(), stream_);
    matmul(layer.w_gate, normed_.data(), n_tokens, gate_.data(), stream_);
    matmul(layer.w_up, normed_.data(), n_tokens, up_.data(), stream_);
    swiglu(gate_.data(), up_.data(), n_tokens * c.d_ff, gate_.data(), stream_);
    matmul(layer.w_down, gate_.data(), n_tokens, normed_.data(), stream_);
    add_in_place(hidden_.data(), normed_.data(), n_tokens * d, stream_);
  }
  const int64_t n_logit_rows = static_cast<int64_t>(logit_indices_host_.size());
  logits_host_.resize(static_cast<size_t>(n_logit_rows * c.vocab_size));
  if (n_logit_rows > 0) {
    gather_rows(hidden_.data(), logit_indices_.data(), n_logit_rows, d, logit_rows_.data(), stream_);
    rmsnorm(logit_rows_.data(), output_norm_, n_logit_rows, d, c.rms_norm_eps, logit_rows_.data(), stream_);
    matmul(output_, logit_rows_.data(), n_logit_rows, logits_.data(), stream_);
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(logits_host_.data(), logits_.data(), logits_host_.size() * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream_));
  }
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return logits_host_;
}

}  // namespace tandem::cuda
