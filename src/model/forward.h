// Forward: runs a Batch through the model, writing K/V into the cache and returning logits
// for the rows that asked for them. One code path for prefill and decode: per layer the
// projections are matrix products over all tokens of the batch; attention reads each
// token's sequence history through the KV blocks of its block table, with the causal mask.
// Scratch buffers are allocated once for `max_batch_tokens` and reused. A pipeline stage runs
// its layers only, from the previous stage's hidden states (run_stage).
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/model.h"
#include "profile/profiler.h"

namespace tandem {

// Tensor parallelism (model/tensor_slice.h): the sum over every rank of a row-parallel
// projection's partial output, in place — the attention output projection's and the FFN down
// projection's [n_tokens, d_model] rows, each rank having multiplied its own heads or columns.
// Every rank must come out with the same bits (the reduction order fixed), since each goes on
// with the result as its residual stream. dist/mpi_all_reduce.h sums over MPI.
class PartialSums {
 public:
  virtual ~PartialSums() = default;
  virtual void all_reduce(std::span<float> rows) = 0;
};

class Forward {
 public:
  // `context_length`: positions one sequence may reach in these runs (0: the model's); it
  // chooses LongRoPE's long or short factors, as llama.cpp's context size does.
  Forward(std::shared_ptr<const Model> model, int64_t max_batch_tokens, ThreadPool& pool, int64_t context_length = 0);

  // Runs the batch. Every sequence's block table must cover its positions in the batch
  // (blocks from the cache's pool). Returns [n_logit_rows, vocab_size] row-major, rows in
  // batch order of tokens with wants_logits; valid until the next run().
  // Throws InputError for out-of-range tokens/positions or a batch larger than max.
  std::span<const float> run(const Batch& batch, KvCache& cache) { return run_stage(batch, {}, cache); }

  // run() over the layers of a pipeline stage (a model loaded with ModelLoadOptions::layers;
  // model/pipeline_stage.h). `hidden_in` is the previous stage's output, the hidden state of
  // every token of the batch, [n_tokens, d_model] f32; empty on the stage holding layer 0,
  // which embeds batch.tokens. Returns what run() does on the stage holding the last layer (the
  // logits rows), and otherwise the hidden states for the next stage, [n_tokens, d_model] (as
  // final_residual()); valid until the next run. `cache` holds this stage's layers only
  // (Model::kv_shape). For a whole model run_stage(batch, {}, cache) is run(batch, cache).
  std::span<const float> run_stage(const Batch& batch, std::span<const float> hidden_in, KvCache& cache);

  // The residual stream after the last layer, before the final norm, of the last run():
  // [n_tokens, d_model] in batch order; valid until the next run(). Embedding requests pool it.
  std::span<const float> final_residual() const {
    return {hidden_.data(), static_cast<size_t>(last_n_tokens_ * model_->config.d_model)};
  }

  // Test hook: called after each layer with the residual stream [n_tokens, d_model].
  using LayerObserver = std::function<void(int64_t layer, std::span<const float> hidden)>;
  void set_layer_observer(LayerObserver observer) { observer_ = std::move(observer); }

  // A tensor-parallel rank's model (Model::tensor_slice) needs the sum over ranks of its
  // row-parallel outputs: set before the first run; it must outlive the runs.
  void set_partial_sums(PartialSums* partial_sums) { partial_sums_ = partial_sums; }

  // Records every op of each run() (null: off). The profiler must outlive the runs.
  void set_profiler(Profiler* profiler);

  const Model& model() const { return *model_; }
  int64_t max_batch_tokens() const { return max_batch_tokens_; }

 private:
  // Tokens per FFN pass in a prefill: bounds the d_ff-wide scratch (for a 512-token batch of a
  // small model it was a tenth of its memory) at the price of reading the FFN weights once per
  // chunk, from cache for the models this size matters for.
  static constexpr int64_t kFfnChunkTokens = 128;

  // run_stage's steps, in order: the batch checked (InputError), embedded (or a later stage's
  // hidden states copied in), the RoPE angles of its positions, then per layer the attention
  // block and the FFN block (each adds into hidden_), and the logits of the rows that want them.
  void check_batch(const Batch& batch, std::span<const float> hidden_in) const;
  void embed(const Batch& batch, std::span<const float> hidden_in);
  void rope_angles_of(const Batch& batch);
  void attention_block(const Batch& batch, KvCache& cache, int64_t layer);
  void ffn_block(int64_t layer, int64_t n_tokens);
  std::span<const float> output_logits(const Batch& batch);
  // The layers' operations, each timed as the profiler's op of `role` in `layer`: RMSNorm of
  // rows [rows, d_model]; rows [n_rows, width] += bias (when the model has it); every head of
  // rows [n_tokens, n_heads * head_dim] RMSNormed in place (Qwen3's Q/K norms); hidden_ +=
  // delta; a matmul; and, under tensor parallelism, normed_ [n_tokens, d_model] (this rank's
  // share of a row-parallel product) summed over every rank.
  void norm_rows(OpRole role, int32_t layer, const float* weight, const float* in, float* out, int64_t rows);
  void add_bias_rows(int32_t layer, const TensorView& bias, float* rows, int64_t n_rows);
  void norm_heads(int32_t layer, const TensorView& weight, float* rows, int64_t n_tokens, int64_t n_heads);
  void add_into_hidden(OpRole role, int32_t layer, const float* delta, int64_t n_tokens);
  void project(OpRole role, int32_t layer, const TensorView& weight, const float* x, int64_t rows, float* out);
  void sum_partials(int64_t n_tokens);
  void map_slots(const Batch& batch, const KvCache& cache);
  // A layer's attention: attn_out_ from q_/k_/v_ (forward.cpp says how, step by step).
  void attention(const Batch& batch, KvCache& cache, int64_t layer);
  void rope_and_store_kv(const Batch& batch, KvCache& cache, int64_t layer);
  int64_t plan_attention_blocks(const Batch& batch, int64_t window);
  int64_t plan_attention_items(int64_t n_blocks);
  void run_attention_items(const Batch& batch, KvCache& cache, int64_t layer, const float* sinks);
  void fold_attention_partials(const float* sinks);
  // A mixture-of-experts FFN over rows [n_rows, d_model] of normed_, in place (forward_experts.cpp).
  void experts_ffn(int64_t layer, float* rows, int64_t n_rows);

  std::shared_ptr<const Model> model_;
  int64_t max_batch_tokens_;
  int64_t last_n_tokens_ = 0;  // tokens of the last run()
  ThreadPool& pool_;
  LayerObserver observer_;
  Profiler* profiler_ = nullptr;
  PartialSums* partial_sums_ = nullptr;
  // Scratch, sized for max_batch_tokens.
  std::vector<float> hidden_;                    // [n_tokens, d_model] residual stream
  std::vector<uint8_t> embedding_row_;           // one embedding row read from the file (Model::embedding_file)
  std::vector<float> normed_;                    // [n_tokens, d_model]; also the Wo and FFN outputs
  std::vector<float> q_;                         // [n_tokens, n_heads * head_dim]
  std::vector<float> k_;                         // [n_tokens, kv_width]
  std::vector<float> v_;                         // [n_tokens, kv_width]
  std::vector<float> attn_out_;                  // [n_tokens, n_heads * head_dim]
  std::vector<float> gate_;                      // [FFN chunk tokens, d_ff]
  std::vector<float> up_;                        // [FFN chunk tokens, d_ff]
  std::vector<float> scores_;                    // [threads, attention scratch] attention score tiles
  std::vector<int64_t> attention_block_starts_;  // [n_blocks + 1] attention's token blocks, then n_tokens
  // One work item of a layer's attention: a token block's KV head, or one segment of it
  // (segment >= 0: a split decode token; its partial results start at query `partial`).
  struct AttentionItem {
    int64_t block, kv_head, segment, partial;
  };
  std::vector<AttentionItem> attention_items_;
  std::vector<float> partial_accs_;           // [split queries, head_dim] the segments' accumulators
  std::vector<AttentionPartial> partials_;    // [split queries] their maxima and sums
  std::vector<float> rope_pair_scratch_;      // [rope_dims] one head before half-split -> adjacent
  std::vector<float> rope_cos_;               // [n_tokens, rope_dims / 2]
  std::vector<float> rope_sin_;               // [n_tokens, rope_dims / 2]
  std::vector<float> rope_cos_local_;         // [n_tokens, rope_dims / 2] local layers' base (gemma3)
  std::vector<float> rope_sin_local_;         // [n_tokens, rope_dims / 2]
  std::vector<int32_t> attention_positions_;  // [n_tokens] position - first position its layer's window reads
  std::vector<int64_t> seq_first_read_;       // [n_sequences] lowest position any of its tokens reads
  RopeRotation rope_rotation_;                // per-pair frequencies and magnitude (RoPE scaling)
  std::vector<int64_t> seq_length_;           // [n_sequences] highest position in the batch + 1
  std::vector<int64_t> seq_slot_start_;       // [n_sequences + 1] each sequence's first entry in slots_
  std::vector<int32_t> slots_;                // per sequence: position -> KV slot, from its block table
  // Mixture of experts, per FFN chunk of tokens (forward_experts.cpp).
  std::vector<float> router_logits_;         // [FFN chunk tokens, n_experts]
  std::vector<float> router_probabilities_;  // [n_experts]
  std::vector<int32_t> routed_experts_;      // [FFN chunk tokens, n_experts_used] chosen experts by rank
  std::vector<float> routed_weights_;        // [FFN chunk tokens, n_experts_used] their weights
  std::vector<int32_t> expert_first_;        // [n_experts + 1] each expert's first entry in expert_entries_
  std::vector<int32_t> router_fill_;         // [n_experts] next free entry per expert while grouping
  std::vector<int32_t> expert_entries_;      // [tokens * n_experts_used] token * n_used + rank, by expert
  std::vector<float> expert_in_;             // [FFN chunk tokens, d_model] one expert's gathered rows
  std::vector<float> expert_out_;            // [FFN chunk tokens, d_model] its outputs
  std::vector<float> routed_out_;            // [FFN chunk tokens * n_experts_used, d_model] by (token, rank)
  MatmulScratch matmul_scratch_;
  std::vector<float> logits_;      // [n_logit_rows, vocab_size]
  std::vector<float> logit_rows_;  // [n_logit_rows, d_model] gathered hidden states
};

}  // namespace tandem
