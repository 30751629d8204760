// The device forward pass (cuda_forward.h): the same order of operations as model/forward.cpp
// for a dense Llama block, each step one kernel launch on this forward's stream, captured into
// a CUDA graph per step shape and replayed.
#include "backends/cuda/cuda_forward.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/block_dequant.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/f16_mma_layout.h"
#include "backends/cuda/forward_kernels.h"
#include "backends/cuda/matmul_f16_mma.h"
#include "backends/cuda/paged_attention.h"
#include "base/error.h"
#include "base/quant.h"
#include "io/mapped_file.h"

namespace tandem::cuda {
namespace {

// Graphs are for steps bound by their launches (decode, small chunks); a larger batch is bound
// by its kernels and would only fill the cache with shapes that rarely repeat.
constexpr int64_t kMaxGraphTokens = 256;
constexpr size_t kMaxCachedGraphs = 32;

size_t aligned_256(size_t bytes) { return (bytes + 255) / 256 * 256; }

bool mma_enabled_by_environment() {
  const char* value = std::getenv("TANDEM_CUDA_MMA");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

// Whether a matrix of this type and shape can take the tensor-core layout (F16 or Q8_0).
bool matrix_fits_mma(DType type, int64_t n_rows, int64_t n_cols) {
  if (type == DType::F16) return fits_f16_mma(n_rows, n_cols);
  return type == DType::Q8_0 && fits_q8_0_mma(n_rows, n_cols);
}

// Whether every matrix of a dense layer can take the tensor-core layout: one type, F16 or
// Q8_0, whole tiles (gate/up: whole 8-row interleave groups, the SwiGLU output whole tiles).
// A property of the model alone, never of a batch.
bool layer_fits_mma(const LayerWeights& layer, const ModelConfig& c) {
  const DType type = layer.wq.dtype;
  if (type != DType::F16 && type != DType::Q8_0) return false;
  for (const TensorView* view : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down})
    if (view->dtype != type) return false;
  const auto fits = [type](int64_t rows, int64_t cols) { return matrix_fits_mma(type, rows, cols); };
  return fits(c.q_width() + 2 * c.kv_width(), c.d_model) && fits(c.d_model, c.q_width()) &&
         fits(2 * c.d_ff, c.d_model) && c.d_ff % (2 * kMmaCols) == 0 && fits(c.d_model, c.d_ff) &&
         c.q_width() % kMmaCols == 0;
}

bool graphs_enabled_by_environment() {
  const char* value = std::getenv("TANDEM_CUDA_GRAPHS");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

// The views' rows one after another, as one row-major matrix's bytes (they share a row size).
std::vector<uint8_t> concatenated_rows(std::initializer_list<const TensorView*> views) {
  std::vector<uint8_t> rows;
  for (const TensorView* view : views) {
    const auto* bytes = static_cast<const uint8_t*>(view->data);
    rows.insert(rows.end(), bytes, bytes + view->n_rows() * view->row_bytes());
  }
  return rows;
}

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
  use_graphs_ = options.cuda_graphs && graphs_enabled_by_environment();
  use_mma_ = mma_enabled_by_environment();
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  for (const LayerWeights& layer : w.layers) {
    Layer device;
    device.attn_norm = upload_vector(layer.attn_norm);
    device.ffn_norm = upload_vector(layer.ffn_norm);
    device.mma = use_mma_ && layer_fits_mma(layer, model_->config);
    if (device.mma) {
      device.qkv_mma = upload_mma({&layer.wq, &layer.wk, &layer.wv}, false);
      device.wo_mma = upload_mma({&layer.wo}, false);
      device.gate_up_mma = upload_mma({&layer.w_gate, &layer.w_up}, true);
      device.down_mma = upload_mma({&layer.w_down}, false);
    } else {
      device.qkv = upload_fused({&layer.wq, &layer.wk, &layer.wv});
      device.wo = upload_matrix(layer.wo);
      device.gate_up = upload_fused({&layer.w_gate, &layer.w_up});
      device.w_down = upload_matrix(layer.w_down);
    }
    layers_.push_back(device);
  }
  output_norm_ = upload_vector(w.output_norm);
  if (use_mma_ && matrix_fits_mma(w.output.dtype, w.output.n_rows(), w.output.row_length()))
    output_mma_ = upload_mma({&w.output}, false);
  else
    output_ = upload_matrix(w.output);
  if (!c.rope_freq_factors.empty())
    rope_freq_factors_ =
        DeviceBuffer<float>(c.rope_freq_factors.data(), static_cast<int64_t>(c.rope_freq_factors.size()));

  const int64_t n_slots = options.kv_blocks * options.block_size;
  kv_row_bytes_ = dtype_row_bytes(options.kv_type, c.kv_width());
  keys_ = DeviceBuffer<uint8_t>(c.n_layers * n_slots * kv_row_bytes_);
  values_ = DeviceBuffer<uint8_t>(c.n_layers * n_slots * kv_row_bytes_);
  // Positions past the context are refused, so no sequence reads more blocks than these.
  max_blocks_per_sequence_ =
      std::min<int64_t>((c.context_length + options.block_size - 1) / options.block_size, options.kv_blocks);

  const int64_t t = options.max_batch_tokens;
  // A batch has at most max_batch_tokens sequences (prepare_batch).
  const size_t input_bytes =
      step_layout(t).block_tables + static_cast<size_t>(t * max_blocks_per_sequence_) * sizeof(int32_t);
  void* pinned = nullptr;
  TANDEM_CUDA_CHECK(cudaMallocHost(&pinned, input_bytes));
  step_inputs_host_.reset(pinned);
  // Pinned, so the copy back runs at the link's rate (a pageable copy is staged by the driver:
  // 64 rows of a 32000 vocabulary are 8 MiB a step).
  TANDEM_CUDA_CHECK(cudaMallocHost(&pinned, static_cast<size_t>(t * c.vocab_size) * sizeof(float)));
  logits_host_.reset(pinned);
  step_inputs_ = DeviceBuffer<uint8_t>(static_cast<int64_t>(input_bytes));
  normed_ = DeviceBuffer<float>(t * c.d_model);
  // Packed f16 activations of the widest matmul input (d_model, q_width or d_ff columns).
  packed_ = DeviceBuffer<uint16_t>(
      std::max({f16_mma_activation_halves(t, c.d_model), f16_mma_activation_halves(t, c.q_width()),
                f16_mma_activation_halves(t, c.d_ff)}));
  packed_ffn_ = DeviceBuffer<uint16_t>(f16_mma_activation_halves(t, c.d_ff));
  qkv_ = DeviceBuffer<float>(t * (c.q_width() + 2 * c.kv_width()));
  attn_ = DeviceBuffer<float>(t * c.q_width());
  gate_up_ = DeviceBuffer<float>(t * 2 * c.d_ff);
  ffn_ = DeviceBuffer<float>(t * c.d_ff);
  logit_rows_ = DeviceBuffer<float>(t * c.d_model);
  logits_ = DeviceBuffer<float>(t * c.vocab_size);
  embedding_row_.resize(static_cast<size_t>(w.token_embedding.row_bytes()));
  // The uploads above went through the legacy default stream, which a non-blocking stream does
  // not wait for (and a pageable cudaMemcpy may return before its DMA lands): wait here.
  TANDEM_CUDA_CHECK(cudaDeviceSynchronize());
  // Last: nothing after it can throw, so the destructor always runs on a created stream.
  TANDEM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaForward::~CudaForward() {
  for (auto& [shape, graph] : graphs_) cudaGraphExecDestroy(graph.exec);  // failures have nowhere to go
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaForward::PinnedDeleter::operator()(void* p) const { cudaFreeHost(p); }

DeviceMatrix CudaForward::upload_matrix(const TensorView& view) {
  return upload_rows(static_cast<const uint8_t*>(view.data), view.dtype, view.n_rows(), view.row_length());
}

// Rows in their file's block format, except Q8_0 and Q4_0, which go up in the split layout
// (block_dequant.h: quants apart from scales, the GEMV's 8-byte loads).
DeviceMatrix CudaForward::upload_rows(const uint8_t* rows, DType type, int64_t n_rows, int64_t n_cols) {
  const int64_t row_bytes = dtype_row_bytes(type, n_cols);
  if (!cuda_split_layout(type)) {
    weight_storage_.emplace_back(rows, n_rows * row_bytes);
    weight_bytes_ += n_rows * row_bytes;
    return {weight_storage_.back().data(), type, n_rows, n_cols, row_bytes};
  }
  int64_t scales_offset = 0;
  const std::vector<uint8_t> split = split_block_rows(type, rows, n_rows, n_cols, &scales_offset);
  weight_storage_.emplace_back(split);
  weight_bytes_ += static_cast<int64_t>(split.size());
  const uint8_t* device = weight_storage_.back().data();
  return {device,
          type,
          n_rows,
          n_cols,
          cuda_split_quant_row_bytes(type, n_cols),
          reinterpret_cast<const uint16_t*>(device + scales_offset)};
}

// One matrix of all the views' rows in order when they share a type and width (the common
// case: a matmul launch instead of two or three, the same per-row arithmetic), else each alone.
CudaForward::FusedMatrix CudaForward::upload_fused(std::initializer_list<const TensorView*> views) {
  FusedMatrix fused;
  const TensorView& first = **views.begin();
  bool same = true;
  for (const TensorView* view : views) {
    same = same && view->dtype == first.dtype && view->row_length() == first.row_length();
    fused.n_rows += view->n_rows();
  }
  if (!same) {
    for (const TensorView* view : views) fused.parts.push_back(upload_matrix(*view));
    return fused;
  }
  const std::vector<uint8_t> rows = concatenated_rows(views);
  fused.parts.push_back(upload_rows(rows.data(), first.dtype, fused.n_rows, first.row_length()));
  return fused;
}

const float* CudaForward::upload_vector(const TensorView& view) {
  std::vector<float> values(static_cast<size_t>(view.n_elements()));
  dequantize_row(view.dtype, view.data, values.data(), view.n_elements());
  vector_storage_.emplace_back(values);
  weight_bytes_ += view.n_elements() * static_cast<int64_t>(sizeof(float));
  return vector_storage_.back().data();
}

CudaForward::StepLayout CudaForward::step_layout(int64_t n_tokens) const {
  const size_t ints = aligned_256(static_cast<size_t>(n_tokens) * sizeof(int32_t));
  const size_t hidden = aligned_256(static_cast<size_t>(n_tokens * model_->config.d_model) * sizeof(float));
  return {.positions = 0,
          .seq_ids = ints,
          .slots = 2 * ints,
          .logit_indices = 3 * ints,
          .hidden = 4 * ints,
          .block_tables = 4 * ints + hidden};
}

// Checks the batch as the CPU forward does, embeds its tokens on the host (a row each: the
// table stays in host memory), maps positions to slots through the block tables, and copies
// all of it to the device in one transfer from pinned memory.
void CudaForward::prepare_batch(const Batch& batch) {
  const ModelConfig& c = model_->config;
  const TensorView& embedding = model_->weights.token_embedding;
  const int64_t n_tokens = batch.n_tokens(), d = c.d_model, block_size = options_.block_size;
  TANDEM_CHECK_INPUT(n_tokens > 0 && n_tokens <= options_.max_batch_tokens, "batch of {} tokens (allowed 1..{})",
                     n_tokens, options_.max_batch_tokens);
  TANDEM_CHECK_INPUT(batch.n_sequences() <= options_.max_batch_tokens, "a batch of {} sequences (allowed up to {})",
                     batch.n_sequences(), options_.max_batch_tokens);
  const StepLayout layout = step_layout(n_tokens);
  auto* host = static_cast<uint8_t*>(step_inputs_host_.get());
  auto* positions = reinterpret_cast<int32_t*>(host + layout.positions);
  auto* seq_ids = reinterpret_cast<int32_t*>(host + layout.seq_ids);
  auto* slots = reinterpret_cast<int32_t*>(host + layout.slots);
  auto* logit_indices = reinterpret_cast<int32_t*>(host + layout.logit_indices);
  auto* hidden = reinterpret_cast<float*>(host + layout.hidden);
  auto* block_tables = reinterpret_cast<int32_t*>(host + layout.block_tables);
  const int64_t stride = max_blocks_per_sequence_;
  std::fill(block_tables, block_tables + batch.n_sequences() * stride, 0);
  for (int32_t s = 0; s < batch.n_sequences(); ++s) {
    const std::vector<int32_t>& table = batch.block_tables[static_cast<size_t>(s)];
    TANDEM_CHECK_INPUT(static_cast<int64_t>(table.size()) <= options_.kv_blocks,
                       "a block table of {} blocks (the pool has {})", table.size(), options_.kv_blocks);
    for (size_t b = 0; b < table.size(); ++b) {
      TANDEM_CHECK_INPUT(table[b] >= 0 && table[b] < options_.kv_blocks, "KV block {} is outside the pool of {} blocks",
                         table[b], options_.kv_blocks);
      // Blocks past the context's last are never read (positions past the context are refused).
      if (static_cast<int64_t>(b) < stride) block_tables[s * stride + static_cast<int64_t>(b)] = table[b];
    }
  }
  n_logit_rows_ = 0;
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
    positions[t] = position;
    seq_ids[t] = seq;
    slots[t] =
        static_cast<int32_t>(table[static_cast<size_t>(position / block_size)] * block_size + position % block_size);
    const void* row = embedding.row(token);
    if (model_->embedding_file != nullptr) {
      model_->embedding_file->read(row, embedding_row_.size(), embedding_row_.data());
      row = embedding_row_.data();
    }
    dequantize_row(embedding.dtype, row, hidden + t * d, d);
    if (batch.wants_logits[t] != 0) logit_indices[n_logit_rows_++] = static_cast<int32_t>(t);
  }
  step_input_bytes_ = layout.block_tables + static_cast<size_t>(batch.n_sequences() * stride) * sizeof(int32_t);
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(step_inputs_.data(), host, step_input_bytes_, cudaMemcpyHostToDevice, stream_));
}

CudaForward::MmaMatrix CudaForward::upload_mma(std::initializer_list<const TensorView*> views,
                                               bool interleave_gate_up) {
  const TensorView& first = **views.begin();
  MmaMatrix m{nullptr, first.dtype, 0, first.row_length()};
  for (const TensorView* view : views) m.n_rows += view->n_rows();
  std::vector<uint8_t> rows;
  if (interleave_gate_up) {
    const TensorView& up = **(views.begin() + 1);
    rows.resize(static_cast<size_t>(m.n_rows * first.row_bytes()));
    interleave_gate_up_rows(static_cast<const uint8_t*>(first.data), static_cast<const uint8_t*>(up.data),
                            first.n_rows(), first.row_bytes(), rows.data());
  } else {
    rows = concatenated_rows(views);
  }
  std::vector<uint8_t> packed(rows.size());
  if (m.type == DType::F16)
    pack_f16_mma_weights(reinterpret_cast<const uint16_t*>(rows.data()), m.n_rows, m.n_cols,
                         reinterpret_cast<uint16_t*>(packed.data()));
  else
    pack_q8_0_mma_weights(rows.data(), m.n_rows, m.n_cols, packed.data());
  weight_storage_.emplace_back(packed);
  weight_bytes_ += static_cast<int64_t>(packed.size());
  m.data = weight_storage_.back().data();
  return m;
}

void CudaForward::run_mma(const MmaMatrix& m, const uint16_t* packed_x, int64_t n_tokens, const MmaEpilogue& epilogue) {
  matmul_mma(m.type, m.data, m.n_rows, m.n_cols, packed_x, n_tokens, epilogue, stream_);
}

void CudaForward::matmul_fused(const FusedMatrix& m, const float* x, int64_t n_tokens, float* out) {
  int64_t column = 0;
  for (const DeviceMatrix& part : m.parts) {
    matmul(part, x, n_tokens, out + column, stream_, false, m.n_rows);
    column += part.n_rows;
  }
}

// Every launch of a step on stream_. Its arguments depend on (n_tokens, n_logit_rows) and on
// nothing else that changes between steps: what a batch changes is read from step_inputs_.
void CudaForward::launch_step(int64_t n_tokens, int64_t n_logit_rows) {
  const ModelConfig& c = model_->config;
  const int64_t d = c.d_model, qkv_width = c.q_width() + 2 * c.kv_width();
  const int64_t n_slots = options_.kv_blocks * options_.block_size;
  const bool half_split = c.rope_pairing == RopePairing::HalfSplit;
  const float* freq_factors = rope_freq_factors_.size() > 0 ? rope_freq_factors_.data() : nullptr;
  const StepLayout layout = step_layout(n_tokens);
  uint8_t* inputs = step_inputs_.data();
  const auto* positions = reinterpret_cast<const int32_t*>(inputs + layout.positions);
  const auto* seq_ids = reinterpret_cast<const int32_t*>(inputs + layout.seq_ids);
  const auto* slots = reinterpret_cast<const int32_t*>(inputs + layout.slots);
  const auto* logit_indices = reinterpret_cast<const int32_t*>(inputs + layout.logit_indices);
  auto* hidden = reinterpret_cast<float*>(inputs + layout.hidden);
  const auto* block_tables = reinterpret_cast<const int32_t*>(inputs + layout.block_tables);
  float* k_rows = qkv_.data() + c.q_width();  // K then V, in each token's QKV row
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    uint8_t* layer_keys = keys_.data() + static_cast<int64_t>(l) * n_slots * kv_row_bytes_;
    uint8_t* layer_values = values_.data() + static_cast<int64_t>(l) * n_slots * kv_row_bytes_;
    // On the tensor cores the activations go in packed f16: RMSNorm writes them so directly.
    const auto mma = [&](const MmaMatrix& m, const uint16_t* x, const MmaEpilogue& epilogue) {
      run_mma(m, x, n_tokens, epilogue);
    };
    if (layer.mma) {
      rmsnorm_pack_f16_mma(hidden, layer.attn_norm, n_tokens, d, c.rms_norm_eps, packed_.data(), stream_);
      mma(layer.qkv_mma, packed_.data(), {.mode = MmaOutput::Store, .out = qkv_.data()});
    } else {
      rmsnorm(hidden, layer.attn_norm, n_tokens, d, c.rms_norm_eps, normed_.data(), stream_);
      matmul_fused(layer.qkv, normed_.data(), n_tokens, qkv_.data());
    }
    // Q's heads and K's heads are adjacent in a QKV row: one RoPE launch rotates both.
    rope(qkv_.data(), n_tokens, qkv_width, c.n_heads + c.n_kv_heads, c.head_dim, c.rope_dims, positions,
         c.rope_freq_base, freq_factors, half_split, stream_);
    store_kv_rows(k_rows, n_tokens, qkv_width, c.kv_width(), slots, options_.kv_type, layer_keys, layer_values,
                  kv_row_bytes_, stream_);
    const PagedKv kv{layer_keys,       layer_values,        kv_row_bytes_, kv_row_bytes_,
                     options_.kv_type, options_.block_size, block_tables,  max_blocks_per_sequence_};
    paged_attention(qkv_.data(), qkv_width, n_tokens, c.n_heads, c.n_kv_heads, c.head_dim, positions, seq_ids, kv,
                    attn_.data(), c.q_width(), stream_);
    if (layer.mma) {
      pack_activations_f16_mma(attn_.data(), n_tokens, c.q_width(), packed_.data(), stream_);
      mma(layer.wo_mma, packed_.data(), {.mode = MmaOutput::Add, .out = hidden});
      rmsnorm_pack_f16_mma(hidden, layer.ffn_norm, n_tokens, d, c.rms_norm_eps, packed_.data(), stream_);
      // silu(gate) * up comes out packed: the down projection's input.
      mma(layer.gate_up_mma, packed_.data(), {.mode = MmaOutput::SwiGluPacked, .packed = packed_ffn_.data()});
      mma(layer.down_mma, packed_ffn_.data(), {.mode = MmaOutput::Add, .out = hidden});
      continue;
    }
    matmul(layer.wo, attn_.data(), n_tokens, hidden, stream_, /*accumulate=*/true);
    rmsnorm(hidden, layer.ffn_norm, n_tokens, d, c.rms_norm_eps, normed_.data(), stream_);
    matmul_fused(layer.gate_up, normed_.data(), n_tokens, gate_up_.data());
    swiglu_rows(gate_up_.data(), n_tokens, c.d_ff, ffn_.data(), stream_);
    matmul(layer.w_down, ffn_.data(), n_tokens, hidden, stream_, /*accumulate=*/true);
  }
  if (n_logit_rows > 0) {
    gather_rows(hidden, logit_indices, n_logit_rows, d, logit_rows_.data(), stream_);
    if (output_mma_.data != nullptr) {
      rmsnorm_pack_f16_mma(logit_rows_.data(), output_norm_, n_logit_rows, d, c.rms_norm_eps, packed_.data(), stream_);
      run_mma(output_mma_, packed_.data(), n_logit_rows, {.mode = MmaOutput::Store, .out = logits_.data()});
    } else {
      rmsnorm(logit_rows_.data(), output_norm_, n_logit_rows, d, c.rms_norm_eps, logit_rows_.data(), stream_);
      matmul(output_, logit_rows_.data(), n_logit_rows, logits_.data(), stream_);
    }
  }
}

// Captures the step's launches for this shape into an instantiated graph. Throws CudaError
// when the runtime refuses (the stream is left out of capture).
cudaGraphExec_t CudaForward::capture_step(int64_t n_tokens, int64_t n_logit_rows) {
  // Relaxed: the launches call cudaFuncSetAttribute (paged attention's shared memory), which a
  // stricter capture mode could refuse; nothing in launch_step synchronises or allocates.
  TANDEM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
  cudaGraph_t graph = nullptr;
  try {
    launch_step(n_tokens, n_logit_rows);
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);  // ends the capture; the first error is the one thrown
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  TANDEM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  TANDEM_CUDA_CHECK(instantiated);
  return exec;
}

// Runs the step from its shape's graph, captured the first time the shape is seen. If the
// runtime refuses a capture, graphs stay off for this forward (graphs_off_reason says why)
// and the step runs as plain launches: the same kernels, the same results.
void CudaForward::run_step_graph(int64_t n_tokens, int64_t n_logit_rows) {
  const std::pair<int64_t, int64_t> shape{n_tokens, n_logit_rows};
  auto found = graphs_.find(shape);
  if (found == graphs_.end()) {
    if (graphs_.size() >= kMaxCachedGraphs) {
      auto oldest = std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
        return a.second.last_used < b.second.last_used;
      });
      TANDEM_CUDA_CHECK(cudaGraphExecDestroy(oldest->second.exec));
      graphs_.erase(oldest);
    }
    cudaGraphExec_t exec = nullptr;
    try {
      exec = capture_step(n_tokens, n_logit_rows);
    } catch (const CudaError& error) {
      use_graphs_ = false;
      graphs_off_reason_ = error.what();
      launch_step(n_tokens, n_logit_rows);
      return;
    }
    found = graphs_.emplace(shape, CachedGraph{.exec = exec, .last_used = 0}).first;
  }
  found->second.last_used = ++steps_;
  TANDEM_CUDA_CHECK(cudaGraphLaunch(found->second.exec, stream_));
  ++graph_replays_;
}

std::span<const float> CudaForward::run(const Batch& batch) {
  prepare_batch(batch);
  const ModelConfig& c = model_->config;
  const int64_t n_tokens = batch.n_tokens();
  if (use_graphs_ && n_tokens <= kMaxGraphTokens)
    run_step_graph(n_tokens, n_logit_rows_);
  else
    launch_step(n_tokens, n_logit_rows_);
  const auto n_logits = static_cast<size_t>(n_logit_rows_ * c.vocab_size);
  if (n_logits > 0)
    TANDEM_CUDA_CHECK(
        cudaMemcpyAsync(logits_host_.get(), logits_.data(), n_logits * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return {static_cast<const float*>(logits_host_.get()), n_logits};
}

}  // namespace tandem::cuda
