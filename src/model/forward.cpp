// The forward pass of a Llama block stack over a ragged batch (see forward.h):
//   x = embed(tokens)
//   per layer: x += Wo · attention(rope(Wq·n), rope(Wk·n) -> cache, Wv·n -> cache), n = rmsnorm(x)
//              (Qwen2: + biases after Wq/Wk/Wv; Qwen3: each Q and K head RMSNormed before rope)
//              x += Wdown · (silu(Wgate·n) ⊙ Wup·n),                                n = rmsnorm(x)
//   logits = Wout · rmsnorm(x) for the rows that asked for them.
// Gemma blocks (gemma3) add: x = embed(tokens) · sqrt(d_model); RMSNorm of the attention and
// FFN outputs before they join x; gelu(tanh) for silu; logits soft-capped when the file says.
// A local (sliding-window) layer's token at position p attends to (p - window, p] only.
// gpt-oss adds a bias to Wo's output and a learned sink logit per query head to the softmax.
// A pipeline stage runs its layers only: from embed(tokens) or the previous stage's x, to the
// logits or its x (model/pipeline_stage.h).
// A tensor-parallel rank (model/tensor_slice.h) runs its heads and FFN columns only: Wo's and
// Wdown's outputs are partial sums that PartialSums adds up over the ranks before they go on.
#include "model/forward.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/quant.h"
#include "io/mapped_file.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/geglu.h"
#include "kernels/kernel_table.h"

namespace tandem {

namespace {

// For the profiler: each block of tokens reads the K and V rows of its last token's history
// once (its tokens share them), the queries are read and the outputs written; QKᵀ and PV
// are 4 operations per (query head, position, dimension).
OpCost attention_cost(const std::vector<int64_t>& block_starts, const std::vector<int32_t>& positions,
                      const ModelConfig& c, int64_t kv_row_bytes, const KernelTable& table) {
  OpCost cost;
  for (size_t b = 0; b + 1 < block_starts.size(); ++b)
    cost.bytes += 2 * (positions[static_cast<size_t>(block_starts[b + 1] - 1)] + 1) * kv_row_bytes;
  const int64_t n_tokens = block_starts.back();
  for (int64_t t = 0; t < n_tokens; ++t)
    cost.flops += 4 * (positions[static_cast<size_t>(t)] + int64_t{1}) * c.head_dim * c.n_heads;
  cost.bytes += 2 * n_tokens * c.q_width() * static_cast<int64_t>(sizeof(float));
  // Held against the instruction ceiling of the arithmetic the attention kernel runs.
  switch (table.attention_arithmetic) {
    case AttentionArithmetic::F32: cost.peak = Peak::FmaF32; break;
    case AttentionArithmetic::Bf16: cost.peak = table.attention_on_tiles ? Peak::TileBf16 : Peak::Bf16; break;
    case AttentionArithmetic::Bf16Values: cost.peak = Peak::Bf16Values; break;
  }
  return cost;
}

// One head's first rope_dims elements from half-split pairing (i with i + rope_dims/2) to
// adjacent pairing (2i, 2i+1), the order the RoPE kernel rotates; the rest stay. `tmp`: rope_dims.
void half_split_to_adjacent(float* head, int64_t rope_dims, float* tmp) {
  const int64_t half = rope_dims / 2;
  std::copy_n(head, rope_dims, tmp);
  for (int64_t i = 0; i < half; ++i) {
    head[2 * i] = tmp[i];
    head[2 * i + 1] = tmp[half + i];
  }
}
}  // namespace

Forward::Forward(std::shared_ptr<const Model> model, int64_t max_batch_tokens, ThreadPool& pool, int64_t context_length)
    : model_(std::move(model)), max_batch_tokens_(max_batch_tokens), pool_(pool) {
  TANDEM_ASSERT(max_batch_tokens_ > 0);
  const ModelConfig& c = model_->config;
  rope_rotation_ = make_rope_rotation(c.rope_dims, c.rope_freq_base, c.rope_freq_factors, c.rope_scaling,
                                      context_length > 0 ? context_length : c.context_length);
  const auto n = static_cast<size_t>(max_batch_tokens_);
  hidden_.resize(n * c.d_model);
  if (model_->embedding_file != nullptr)
    embedding_row_.resize(static_cast<size_t>(model_->weights.token_embedding.row_bytes()));
  normed_.resize(n * c.d_model);
  q_.resize(n * c.q_width());
  k_.resize(n * c.kv_width());
  v_.resize(n * c.kv_width());
  attn_out_.resize(n * c.q_width());
  const auto ffn_rows = static_cast<size_t>(std::min(max_batch_tokens_, kFfnChunkTokens));
  const auto ffn_width = static_cast<size_t>(c.has_experts() ? c.d_ff_expert : c.d_ff);
  gate_.resize(ffn_rows * ffn_width);
  up_.resize(ffn_rows * ffn_width);
  if (c.has_experts()) {
    const auto used = static_cast<size_t>(c.n_experts_used);
    router_logits_.resize(ffn_rows * c.n_experts);
    router_probabilities_.resize(static_cast<size_t>(c.n_experts));
    routed_experts_.resize(ffn_rows * used);
    routed_weights_.resize(ffn_rows * used);
    expert_first_.resize(static_cast<size_t>(c.n_experts) + 1);
    router_fill_.resize(static_cast<size_t>(c.n_experts));
    expert_entries_.resize(ffn_rows * used);
    expert_in_.resize(ffn_rows * c.d_model);
    expert_out_.resize(ffn_rows * c.d_model);
    routed_out_.resize(ffn_rows * used * c.d_model);
  }
  scores_.resize(static_cast<size_t>(pool_.size() * attention_scratch_floats(c.n_heads / c.n_kv_heads)));
  attention_block_starts_.reserve(n + 1);
  rope_pair_scratch_.resize(static_cast<size_t>(c.rope_dims));
  rope_cos_.resize(n * c.rope_dims / 2);
  rope_sin_.resize(n * c.rope_dims / 2);
  if (c.rope_freq_base_local > 0.0f) {
    rope_cos_local_.resize(n * c.rope_dims / 2);
    rope_sin_local_.resize(n * c.rope_dims / 2);
  }
  attention_positions_.resize(n);
  // Logit buffers grow to the most rows ever requested (usually 1 per sequence), not to
  // max_batch_tokens x vocab_size: that would be most of the memory for a big prefill.
}

void Forward::set_profiler(Profiler* profiler) {
  if (profiler != nullptr) profiler->prepare(model_->config.n_layers);
  profiler_ = profiler;
}

std::span<const float> Forward::run_stage(const Batch& batch, std::span<const float> hidden_in, KvCache& cache) {
  const LayerRange layers = model_->held_layers();
  const int64_t n_tokens = batch.n_tokens();
  TANDEM_ASSERT(cache.n_layers() == layers.size());
  ProfileStep profile_step(profiler_, n_tokens == batch.n_sequences() ? Phase::Decode : Phase::Prefill, n_tokens);
  ProfileOp setup_op(profiler_, OpRole::Setup, -1, [] { return OpCost{}; });
  check_batch(batch, hidden_in);
  map_slots(batch, cache);
  last_n_tokens_ = n_tokens;
  setup_op.end();
  embed(batch, hidden_in);
  rope_angles_of(batch);
  // Under tensor parallelism a rank holds a slice of every layer (forward pass's partial sums).
  TANDEM_ASSERT(!model_->tensor_slice || partial_sums_ != nullptr);
  for (int64_t l = layers.first; l < layers.end; ++l) {
    attention_block(batch, cache, l);
    ffn_block(l, n_tokens);
    if (observer_)
      observer_(l, std::span<const float>(hidden_.data(), static_cast<size_t>(n_tokens * model_->config.d_model)));
  }
  // A stage without the head hands every token's hidden state on.
  if (!model_->holds_head()) return {hidden_.data(), static_cast<size_t>(n_tokens * model_->config.d_model)};
  return output_logits(batch);
}

void Forward::check_batch(const Batch& batch, std::span<const float> hidden_in) const {
  const ModelConfig& c = model_->config;
  const int64_t n_tokens = batch.n_tokens();
  TANDEM_CHECK_INPUT(n_tokens > 0 && n_tokens <= max_batch_tokens_, "batch of {} tokens (allowed 1..{})", n_tokens,
                     max_batch_tokens_);
  TANDEM_ASSERT(static_cast<int64_t>(batch.positions.size()) == n_tokens &&
                static_cast<int64_t>(batch.seq_ids.size()) == n_tokens &&
                static_cast<int64_t>(batch.wants_logits.size()) == n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) {
    TANDEM_CHECK_INPUT(batch.tokens[t] >= 0 && batch.tokens[t] < c.vocab_size,
                       "token id {} is outside the vocabulary (0..{})", batch.tokens[t], c.vocab_size - 1);
    TANDEM_CHECK_INPUT(batch.positions[t] >= 0 && batch.positions[t] < c.context_length,
                       "position {} is outside the context (0..{})", batch.positions[t], c.context_length - 1);
    TANDEM_CHECK_INPUT(batch.seq_ids[t] >= 0 && batch.seq_ids[t] < batch.n_sequences(),
                       "sequence id {} is out of range (the batch has {} sequences)", batch.seq_ids[t],
                       batch.n_sequences());
  }
  const int64_t d = c.d_model;
  if (model_->holds_embedding())
    TANDEM_CHECK_INPUT(hidden_in.empty(), "the first pipeline stage takes token ids, not {} hidden-state floats",
                       hidden_in.size());
  else
    TANDEM_CHECK_INPUT(static_cast<int64_t>(hidden_in.size()) == n_tokens * d,
                       "pipeline stage from layer {} takes the hidden states of {} tokens x {} floats, got {} floats",
                       model_->held_layers().first, n_tokens, d, hidden_in.size());
}

void Forward::embed(const Batch& batch, std::span<const float> hidden_in) {
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  const int64_t n_tokens = batch.n_tokens(), d = c.d_model;
  const bool embeds = model_->holds_embedding();
  // A later stage's input (the previous stage's hidden states) is copied in where the first
  // embeds: the profiler shows it as this op.
  ProfileOp embedding_op(profiler_, OpRole::Embedding, -1, [&] {
    if (!embeds) return OpCost{2 * n_tokens * d * 4, 0};
    return OpCost{n_tokens * (w.token_embedding.row_bytes() + d * 4), n_tokens * d};
  });
  if (!embeds) std::copy(hidden_in.begin(), hidden_in.end(), hidden_.begin());
  for (int64_t t = 0; t < n_tokens && embeds; ++t) {
    const void* row = w.token_embedding.row(batch.tokens[t]);
    if (model_->embedding_file != nullptr) {
      model_->embedding_file->read(row, embedding_row_.size(), embedding_row_.data());
      row = embedding_row_.data();
    }
    dequantize_row(w.token_embedding.dtype, row, hidden_.data() + t * d, d);
    if (c.gemma_blocks) {
      const float embedding_scale = std::sqrt(static_cast<float>(d));
      for (int64_t i = 0; i < d; ++i) hidden_[t * d + i] *= embedding_scale;
    }
  }
}

void Forward::rope_angles_of(const Batch& batch) {
  const ModelConfig& c = model_->config;
  const int64_t n_tokens = batch.n_tokens(), half_rope = c.rope_dims / 2;
  ProfileOp angles_op(profiler_, OpRole::Setup, -1, [] { return OpCost{}; });
  for (int64_t t = 0; t < n_tokens; ++t)
    rope_rotation_.angles(batch.positions[t], rope_cos_.data() + t * half_rope, rope_sin_.data() + t * half_rope);
  // Gemma's local layers turn at a base of their own, without the global layers' scaling.
  if (c.rope_freq_base_local > 0.0f)
    for (int64_t t = 0; t < n_tokens; ++t)
      rope_angles(batch.positions[t], c.rope_dims, c.rope_freq_base_local, nullptr,
                  rope_cos_local_.data() + t * half_rope, rope_sin_local_.data() + t * half_rope);
}

void Forward::norm_rows(OpRole role, int32_t layer, const float* weight, const float* in, float* out, int64_t rows) {
  const ModelConfig& c = model_->config;
  const int64_t d = c.d_model;
  const RmsnormFn rmsnorm = kernel_table().rmsnorm;
  ProfileOp op(profiler_, role, layer, [&] { return elementwise_cost(rows * d + d, rows * d, 4 * rows * d); });
  pool_.parallel_for(rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) rmsnorm(in + t * d, weight, d, c.rms_norm_eps, out + t * d);
  });
}

void Forward::add_bias_rows(int32_t layer, const TensorView& bias, float* rows, int64_t n_rows) {
  if (bias.data == nullptr) return;
  const int64_t width = bias.n_elements();
  ProfileOp op(profiler_, OpRole::Bias, layer,
               [&] { return elementwise_cost(n_rows * width + width, n_rows * width, n_rows * width); });
  const float* b = bias.f32();
  for (int64_t t = 0; t < n_rows; ++t)
    for (int64_t i = 0; i < width; ++i) rows[t * width + i] += b[i];
}

void Forward::norm_heads(int32_t layer, const TensorView& weight, float* rows, int64_t n_tokens, int64_t n_heads) {
  if (weight.data == nullptr) return;
  const ModelConfig& c = model_->config;
  const int64_t width = n_heads * c.head_dim, n_rows = n_tokens * n_heads;
  ProfileOp op(profiler_, OpRole::QkNorm, layer,
               [&] { return elementwise_cost(n_tokens * width + c.head_dim, n_tokens * width, 4 * n_tokens * width); });
  const RmsnormFn rmsnorm = kernel_table().rmsnorm;
  const float* w = weight.f32();
  pool_.parallel_for(n_rows, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r)
      rmsnorm(rows + r * c.head_dim, w, c.head_dim, c.rms_norm_eps, rows + r * c.head_dim);
  });
}

void Forward::add_into_hidden(OpRole role, int32_t layer, const float* delta, int64_t n_tokens) {
  const int64_t d = model_->config.d_model;
  ProfileOp op(profiler_, role, layer, [&] { return elementwise_cost(2 * n_tokens * d, n_tokens * d, n_tokens * d); });
  for (int64_t i = 0; i < n_tokens * d; ++i) hidden_[i] += delta[i];
}

void Forward::project(OpRole role, int32_t layer, const TensorView& weight, const float* x, int64_t rows, float* out) {
  ProfileOp op(profiler_, role, layer,
               [&] { return matmul_cost(weight.dtype, weight.n_bytes(), weight.n_rows(), weight.row_length(), rows); });
  matmul(weight, x, rows, out, pool_, matmul_scratch_);
}

void Forward::sum_partials(int64_t n_tokens) {
  if (model_->tensor_slice)
    partial_sums_->all_reduce(std::span<float>(normed_.data(), static_cast<size_t>(n_tokens * model_->config.d_model)));
}

void Forward::attention_block(const Batch& batch, KvCache& cache, int64_t l) {
  const ModelConfig& c = model_->config;
  const LayerWeights& layer = model_->weights.layers[static_cast<size_t>(l)];
  const auto li = static_cast<int32_t>(l);
  const int64_t n_tokens = batch.n_tokens();
  norm_rows(OpRole::AttnNorm, li, layer.attn_norm.f32(), hidden_.data(), normed_.data(), n_tokens);
  project(OpRole::Wq, li, layer.wq, normed_.data(), n_tokens, q_.data());
  project(OpRole::Wk, li, layer.wk, normed_.data(), n_tokens, k_.data());
  project(OpRole::Wv, li, layer.wv, normed_.data(), n_tokens, v_.data());
  add_bias_rows(li, layer.bq, q_.data(), n_tokens);  // Qwen2; no-op for Llama
  add_bias_rows(li, layer.bk, k_.data(), n_tokens);
  add_bias_rows(li, layer.bv, v_.data(), n_tokens);
  norm_heads(li, layer.q_norm, q_.data(), n_tokens, c.n_heads);  // Qwen3; no-op otherwise
  norm_heads(li, layer.k_norm, k_.data(), n_tokens, c.n_kv_heads);
  attention(batch, cache, l);
  // Wo's output goes to normed_, free once Q, K and V are computed.
  project(OpRole::Wo, li, layer.wo, attn_out_.data(), n_tokens, normed_.data());
  sum_partials(n_tokens);  // a tensor-parallel rank's Wo saw its heads only; bias and norm after the sum
  add_bias_rows(li, layer.bo, normed_.data(), n_tokens);  // gpt-oss; no-op otherwise
  if (c.gemma_blocks)
    norm_rows(OpRole::AttnNorm, li, layer.post_attn_norm.f32(), normed_.data(), normed_.data(), n_tokens);
  add_into_hidden(OpRole::AttnResidual, li, normed_.data(), n_tokens);
}

void Forward::ffn_block(int64_t l, int64_t n_tokens) {
  const ModelConfig& c = model_->config;
  const LayerWeights& layer = model_->weights.layers[static_cast<size_t>(l)];
  const auto li = static_cast<int32_t>(l);
  const int64_t d = c.d_model;
  norm_rows(OpRole::FfnNorm, li, layer.ffn_norm.f32(), hidden_.data(), normed_.data(), n_tokens);
  // The FFN in chunks of tokens: its d_ff-wide buffers are the largest scratch, and each
  // token's FFN is independent of the others'.
  for (int64_t first = 0; first < n_tokens; first += kFfnChunkTokens) {
    const int64_t rows = std::min(kFfnChunkTokens, n_tokens - first);
    float* chunk_in = normed_.data() + first * d;
    if (c.has_experts()) {
      experts_ffn(l, chunk_in, rows);
      continue;
    }
    project(OpRole::Gate, li, layer.w_gate, chunk_in, rows, gate_.data());
    project(OpRole::Up, li, layer.w_up, chunk_in, rows, up_.data());
    ProfileOp swiglu_op(profiler_, OpRole::Swiglu, li,
                        [&] { return elementwise_cost(2 * rows * c.d_ff, rows * c.d_ff, 5 * rows * c.d_ff); });
    const auto activation = c.gemma_blocks ? geglu_row : swiglu_row;
    pool_.parallel_for(rows, [&](int64_t begin, int64_t end, int) {
      for (int64_t t = begin; t < end; ++t)
        activation(gate_.data() + t * c.d_ff, up_.data() + t * c.d_ff, c.d_ff, gate_.data() + t * c.d_ff);
    });
    swiglu_op.end();
    // Into the chunk's own rows of normed_, which gate/up have consumed.
    project(OpRole::Down, li, layer.w_down, gate_.data(), rows, chunk_in);
  }
  sum_partials(n_tokens);  // a tensor-parallel rank's down projection saw its FFN columns only
  if (c.gemma_blocks)
    norm_rows(OpRole::FfnNorm, li, layer.post_ffn_norm.f32(), normed_.data(), normed_.data(), n_tokens);
  add_into_hidden(OpRole::FfnResidual, li, normed_.data(), n_tokens);
}

std::span<const float> Forward::output_logits(const Batch& batch) {
  const ModelConfig& c = model_->config;
  const ModelWeights& w = model_->weights;
  const int64_t n_tokens = batch.n_tokens(), d = c.d_model;
  // Only the rows that want logits go through the final norm and the output head.
  int64_t n_wanted = 0;
  for (int64_t t = 0; t < n_tokens; ++t) n_wanted += batch.wants_logits[t] ? 1 : 0;
  if (static_cast<int64_t>(logit_rows_.size()) < n_wanted * d) {
    logit_rows_.resize(static_cast<size_t>(n_wanted * d));
    logits_.resize(static_cast<size_t>(n_wanted * c.vocab_size));
  }
  int64_t n_rows = 0;
  for (int64_t t = 0; t < n_tokens; ++t)
    if (batch.wants_logits[t]) std::copy_n(hidden_.data() + t * d, d, logit_rows_.data() + (n_rows++) * d);
  if (n_rows == 0) return {};
  TANDEM_ASSERT(w.output.data != nullptr);  // a tensor-parallel rank past 0 is never asked for logits
  norm_rows(OpRole::OutputNorm, -1, w.output_norm.f32(), logit_rows_.data(), logit_rows_.data(), n_rows);
  project(OpRole::Output, -1, w.output, logit_rows_.data(), n_rows, logits_.data());
  if (c.final_logit_softcap > 0.0f)
    softcap_row(logits_.data(), n_rows * c.vocab_size, c.final_logit_softcap, logits_.data());
  return {logits_.data(), static_cast<size_t>(n_rows * c.vocab_size)};
}

void Forward::map_slots(const Batch& batch, const KvCache& cache) {
  // Each sequence's positions 0..(its highest position in the batch) through its block
  // table, into one buffer: attention reads history by slot, and a step's new tokens are
  // written to theirs. Rebuilt every run; a sequence's slots cost one int per position.
  const int32_t n_seqs = batch.n_sequences();
  seq_length_.assign(static_cast<size_t>(n_seqs), 0);
  // With a window on every layer a sequence's table may have dropped blocks (-1) below the
  // lowest position its tokens read: those positions map to no slot.
  const int64_t kv_window = model_->config.kv_window();
  seq_first_read_.assign(static_cast<size_t>(n_seqs), kv_window > 0 ? INT64_MAX : 0);
  for (int64_t t = 0; t < batch.n_tokens(); ++t) {
    const auto s = static_cast<size_t>(batch.seq_ids[t]);
    seq_length_[s] = std::max<int64_t>(seq_length_[s], batch.positions[t] + 1);
    if (kv_window > 0) seq_first_read_[s] = std::min<int64_t>(seq_first_read_[s], batch.positions[t] - kv_window + 1);
  }
  seq_slot_start_.resize(static_cast<size_t>(n_seqs) + 1);
  seq_slot_start_[0] = 0;
  for (int32_t s = 0; s < n_seqs; ++s)
    seq_slot_start_[s + 1] = seq_slot_start_[s] + seq_length_[static_cast<size_t>(s)];
  slots_.resize(static_cast<size_t>(seq_slot_start_[static_cast<size_t>(n_seqs)]));
  const int64_t block_size = cache.block_size();
  for (int32_t s = 0; s < n_seqs; ++s) {
    const std::vector<int32_t>& table = batch.block_tables[static_cast<size_t>(s)];
    const int64_t length = seq_length_[static_cast<size_t>(s)];
    TANDEM_CHECK_INPUT(length <= static_cast<int64_t>(table.size()) * block_size,
                       "sequence {} reaches position {} but its {} KV blocks hold {} positions", s, length - 1,
                       table.size(), static_cast<int64_t>(table.size()) * block_size);
    const int64_t first_read = seq_first_read_[static_cast<size_t>(s)];
    for (int64_t b = 0; b < (length + block_size - 1) / block_size; ++b) {
      const int32_t block = table[static_cast<size_t>(b)];
      if (block < 0 && (b + 1) * block_size <= first_read) continue;  // dropped, never read
      TANDEM_CHECK_INPUT(block >= 0 && block < cache.n_blocks(), "KV block {} is outside the pool of {} blocks", block,
                         cache.n_blocks());
    }
    int32_t* out = slots_.data() + seq_slot_start_[static_cast<size_t>(s)];
    for (int64_t p = 0; p < length; ++p)
      out[p] = table[static_cast<size_t>(p / block_size)] < 0 ? -1 : cache.slot(table, p);
  }
}

void Forward::attention(const Batch& batch, KvCache& cache, int64_t layer) {
  const ModelConfig& c = model_->config;
  rope_and_store_kv(batch, cache, layer);
  const int64_t n_blocks = plan_attention_blocks(batch, c.layer_window(layer));
  const std::vector<int64_t>& block_starts = attention_block_starts_;
  ProfileOp attention_op(profiler_, OpRole::Attention, static_cast<int32_t>(layer), [&] {
    // Positions relative to each token's window: what the kernel reads.
    return attention_cost(block_starts, attention_positions_, c, cache.bytes_per_token() / (2 * cache.n_layers()),
                          kernel_table());
  });
  const int64_t partial_queries = plan_attention_items(n_blocks);
  // gpt-oss: the sink logits of the query heads, [n_heads]; a KV head's group is contiguous.
  const TensorView& sink_view = model_->weights.layers[static_cast<size_t>(layer)].sinks;
  const float* sinks = sink_view.data != nullptr ? sink_view.f32() : nullptr;
  run_attention_items(batch, cache, layer, sinks);
  if (partial_queries > 0) fold_attention_partials(sinks);
}

// RoPE on Q and K (Q scaled where the model's query scale is not the kernel's), then every
// token's K/V into its cache slot (in the cache's types), before any token attends: a prefill
// token must see the K/V of the earlier tokens of the same batch.
void Forward::rope_and_store_kv(const Batch& batch, KvCache& cache, int64_t layer) {
  const ModelConfig& c = model_->config;
  const int64_t n_tokens = batch.n_tokens();
  const int64_t kv_width = c.kv_width(), head_dim = c.head_dim, half_rope = c.rope_dims / 2;
  // A stage's cache holds its layers only, from its first on.
  const int64_t cache_layer = layer - model_->held_layers().first;
  const int64_t window = c.layer_window(layer);
  const bool local_rope = window > 0 && c.rope_freq_base_local > 0.0f;
  const float* cos_tables = local_rope ? rope_cos_local_.data() : rope_cos_.data();
  const float* sin_tables = local_rope ? rope_sin_local_.data() : rope_sin_.data();
  // A query scale other than the kernel's 1/sqrt(head_dim) (query_pre_attn_scalar) goes into Q.
  const float query_scale =
      c.attention_scale > 0.0f ? c.attention_scale * std::sqrt(static_cast<float>(head_dim)) : 1.0f;
  const RopeFn rope = kernel_table().rope;
  const auto li = static_cast<int32_t>(layer);
  ProfileOp rope_op(profiler_, OpRole::Rope, li, [&] {
    const int64_t rotated = n_tokens * (c.n_heads + c.n_kv_heads) * c.rope_dims;
    return elementwise_cost(n_tokens * (c.q_width() + 3 * kv_width), n_tokens * (c.q_width() + 3 * kv_width),
                            3 * rotated);
  });
  const bool half_split = c.rope_pairing == RopePairing::HalfSplit;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cos_table = cos_tables + t * half_rope;
    const float* sin_table = sin_tables + t * half_rope;
    if (half_split) {
      // Q and K reordered alike, so q·k is unchanged; K is cached in the reordered form.
      for (int64_t h = 0; h < c.n_heads; ++h)
        half_split_to_adjacent(q_.data() + t * c.q_width() + h * head_dim, c.rope_dims, rope_pair_scratch_.data());
      for (int64_t h = 0; h < c.n_kv_heads; ++h)
        half_split_to_adjacent(k_.data() + t * kv_width + h * head_dim, c.rope_dims, rope_pair_scratch_.data());
    }
    rope(q_.data() + t * c.q_width(), c.n_heads, head_dim, c.rope_dims, cos_table, sin_table);
    rope(k_.data() + t * kv_width, c.n_kv_heads, head_dim, c.rope_dims, cos_table, sin_table);
    if (query_scale != 1.0f)
      for (int64_t i = 0; i < c.q_width(); ++i) q_[t * c.q_width() + i] *= query_scale;
    const int32_t slot =
        slots_[static_cast<size_t>(seq_slot_start_[static_cast<size_t>(batch.seq_ids[t])] + batch.positions[t])];
    cache.store(cache_layer, slot, k_.data() + t * kv_width, v_.data() + t * kv_width);
  }
  rope_op.end();
}

// The batch's tokens as attention blocks (attention_block_starts_, the block count returned,
// then n_tokens as the end) and each token's position relative to its window
// (attention_positions_).
int64_t Forward::plan_attention_blocks(const Batch& batch, int64_t window) {
  const int64_t n_tokens = batch.n_tokens();
  // Consecutive tokens of one sequence (a prefill chunk) go in blocks of up to
  // kTokensPerBlock through attention_tokens, which shares each K/V row loaded among them;
  // decode tokens of different sequences are blocks of one. One work item per (block, KV
  // head): the query heads sharing that KV head go together (plan_attention_items).
  // row_kernels_bench BM_attention_prefill_tokens, 512 tokens, one query per token (MHA):
  // blocks of 8 tokens run 2.2x as fast as 1, of 16 2.4x; with 8 queries per token (GQA) 1.2x.
  // At long prompts the block is also how often a KV head's history is read again (a block
  // reads every position before it): 64 tokens read it a quarter as often as 16.
  constexpr int64_t kTokensPerBlock = 64;
  // In a local layer, a token whose window has left position 0 reads positions first..p: it
  // goes through the kernel alone, as a token at position p - first over the slots from
  // `first` on (the kernel's tiles then start at its window's start, whatever the batch).
  // Tokens whose window still starts at 0 share blocks as in a global layer.
  auto first_read = [window](int64_t position) {
    return window > 0 ? std::max<int64_t>(0, position - window + 1) : int64_t{0};
  };
  std::vector<int64_t>& block_starts = attention_block_starts_;
  block_starts.clear();
  for (int64_t t = 0; t < n_tokens; ++t) {
    const int64_t first = first_read(batch.positions[t]);
    attention_positions_[static_cast<size_t>(t)] = static_cast<int32_t>(batch.positions[t] - first);
    const bool continues = t > 0 && t - block_starts.back() < kTokensPerBlock && first == 0 &&
                           first_read(batch.positions[t - 1]) == 0 && batch.seq_ids[t] == batch.seq_ids[t - 1] &&
                           batch.positions[t] > batch.positions[t - 1];
    if (!continues) block_starts.push_back(t);
  }
  const int64_t n_blocks = static_cast<int64_t>(block_starts.size());
  block_starts.push_back(n_tokens);
  return n_blocks;
}

// The work items (attention_items_): one per (block, KV head), and for a decode token that
// sees more than one segment (kAttentionSegment) one per (segment, KV head); returns the count
// of partial results (query heads x segments of the split tokens), whose buffers it sizes.
// Items visit blocks first, last, second, second-to-last, ...: a block's cost grows with its
// positions and the pool hands out contiguous ranges, so every range gets its share of long
// and short contexts (in order, a prompt's second half costs three times its first).
int64_t Forward::plan_attention_items(int64_t n_blocks) {
  const ModelConfig& c = model_->config;
  const std::vector<int64_t>& block_starts = attention_block_starts_;
  auto block_of = [n_blocks](int64_t i) { return i % 2 == 0 ? i / 2 : n_blocks - 1 - i / 2; };
  // A decode token (a block of one) that sees more than one segment (kAttentionSegment) is
  // split: one work item per (segment, KV head), each leaving its partial result, then one per
  // KV head folding them in segment order. A long context is then shared by every thread even
  // when its sequence has fewer KV heads than there are threads, and the fold's fixed order
  // gives the bits prefill gives the same token, for any thread count.
  std::vector<AttentionItem>& items = attention_items_;
  items.clear();
  int64_t partial_queries = 0;  // query heads x segments of the split tokens
  for (int64_t i = 0; i < n_blocks; ++i) {
    const int64_t block = block_of(i);
    const int64_t first = block_starts[static_cast<size_t>(block)];
    const int64_t n_ctx = int64_t{attention_positions_[static_cast<size_t>(first)]} + 1;
    const bool split = block_starts[static_cast<size_t>(block + 1)] - first == 1 && n_ctx > kAttentionSegment;
    const int64_t n_segments = split ? attention_segments(n_ctx) : 1;
    for (int64_t kv_head = 0; kv_head < c.n_kv_heads; ++kv_head)
      for (int64_t segment = 0; segment < n_segments; ++segment)
        items.push_back({block, kv_head, split ? segment : -1, split ? partial_queries + segment * c.n_heads : -1});
    if (split) partial_queries += n_segments * c.n_heads;
  }
  partial_accs_.resize(static_cast<size_t>(partial_queries * c.head_dim));
  partials_.resize(static_cast<size_t>(partial_queries));
  return partial_queries;
}

// Every item on the pool: a block of tokens through attention_tokens, or one segment of a
// split decode token into its partial result.
void Forward::run_attention_items(const Batch& batch, KvCache& cache, int64_t layer, const float* sinks) {
  const ModelConfig& c = model_->config;
  const int64_t head_dim = c.head_dim, group = c.n_heads / c.n_kv_heads;
  const int64_t cache_layer = layer - model_->held_layers().first;
  const KvRows keys = cache.keys(cache_layer);
  const KvRows values = cache.values(cache_layer);
  const std::vector<int64_t>& block_starts = attention_block_starts_;
  const std::vector<AttentionItem>& items = attention_items_;
  pool_.parallel_for(static_cast<int64_t>(items.size()), [&](int64_t begin, int64_t end, int thread) {
    float* scratch = scores_.data() + thread * attention_scratch_floats(group);
    for (int64_t i = begin; i < end; ++i) {
      const AttentionItem& item = items[static_cast<size_t>(i)];
      const int64_t first = block_starts[static_cast<size_t>(item.block)];
      const int64_t block_tokens = block_starts[static_cast<size_t>(item.block + 1)] - first;
      const int64_t first_position = batch.positions[first] - attention_positions_[static_cast<size_t>(first)];
      const int32_t* slots =
          slots_.data() + seq_slot_start_[static_cast<size_t>(batch.seq_ids[first])] + first_position;
      const int64_t first_query = first * c.q_width() + item.kv_head * group * head_dim;
      if (item.segment < 0) {
        attention_tokens(q_.data() + first_query, c.q_width(), block_tokens, group, attention_positions_.data() + first,
                         keys, values, item.kv_head * head_dim, slots, head_dim, scratch,
                         attn_out_.data() + first_query, c.q_width(), c.attn_logit_softcap,
                         sinks != nullptr ? sinks + item.kv_head * group : nullptr);
        continue;
      }
      const int64_t segment_first = item.segment * kAttentionSegment;
      const int64_t n_ctx = int64_t{attention_positions_[static_cast<size_t>(first)]} + 1;
      const int64_t partial = item.partial + item.kv_head * group;
      attention_group_partial(kernel_table(), q_.data() + first_query, group, keys, values, item.kv_head * head_dim,
                              slots + segment_first, std::min(kAttentionSegment, n_ctx - segment_first), head_dim,
                              scratch, partial_accs_.data() + partial * head_dim, c.attn_logit_softcap,
                              partials_.data() + partial);
    }
  });
}

// The split tokens' partial results folded per KV head in segment order (the bits prefill
// gives the same token, for any thread count).
void Forward::fold_attention_partials(const float* sinks) {
  const ModelConfig& c = model_->config;
  const int64_t head_dim = c.head_dim, group = c.n_heads / c.n_kv_heads;
  const std::vector<int64_t>& block_starts = attention_block_starts_;
  const std::vector<AttentionItem>& items = attention_items_;
  // The fold: the split tokens' items come in (KV head, segment) order, segment 0 first.
  pool_.parallel_for(static_cast<int64_t>(items.size()), [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const AttentionItem& item = items[static_cast<size_t>(i)];
      if (item.segment != 0) continue;
      const int64_t first = block_starts[static_cast<size_t>(item.block)];
      const int64_t n_segments = attention_segments(int64_t{attention_positions_[static_cast<size_t>(first)]} + 1);
      const int64_t first_query = first * c.q_width() + item.kv_head * group * head_dim;
      const int64_t partial = item.partial + item.kv_head * group;
      combine_attention_segments(partial_accs_.data() + partial * head_dim, c.n_heads * head_dim,
                                 partials_.data() + partial, c.n_heads, n_segments, group, head_dim,
                                 sinks != nullptr ? sinks + item.kv_head * group : nullptr,
                                 attn_out_.data() + first_query);
    }
  });
}

}  // namespace tandem
