// tandem info: what a model file holds — architecture, hyperparameters, weight types and
// bytes, KV cache cost per token and at full context, and the decode floor (bytes of
// weights read per generated token); with --pipeline S, each pipeline stage's share; with
// --tensor-parallel T, each tensor-parallel rank's.
#include <cstdio>
#include <map>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/device_options.h"
#include "cli/human_units.h"
#include "cli/kv_type_options.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kv/kv_cache.h"
#include "kv/kv_pool_plan.h"
#include "model/attention_window.h"
#include "model/model.h"
#include "model/pipeline_stage.h"
#include "model/tensor_slice.h"

namespace tandem::cli {
namespace {

// One line: the scaling type, its factor and original context, and the values that shape it.
void print_rope_scaling(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScalingType::None) {
    fmt::print("rope scaling:    {}\n",
               c.rope_freq_factors.empty() ? "none" : "per-pair frequency divisors (rope_freqs.weight: Llama 3 style)");
    return;
  }
  std::string details;
  if (s.type == RopeScalingType::Yarn)
    details = fmt::format(", beta_fast {}, beta_slow {}, ext_factor {}, magnitude {:.4f}{}", s.yarn_beta_fast,
                          s.yarn_beta_slow, s.yarn_ext_factor, s.magnitude(),
                          s.yarn_truncate ? "" : ", ramp ends not rounded (truncate false)");
  else if (s.type == RopeScalingType::LongRope)
    details = fmt::format(", long factors when the context exceeds {} (short otherwise), magnitude {:.4f}",
                          s.original_context, s.magnitude());
  else if (s.magnitude() != 1.0)
    details = fmt::format(", magnitude {:.4f}", s.magnitude());
  fmt::print("rope scaling:    {}, factor {}, original context {}{}\n", rope_scaling_type_name(s.type), s.factor,
             s.original_context, details);
}

// --pipeline S: what each stage (an MPI rank of issue 16) would hold of the split
// split_layers makes: its layers, weight bytes (the embedding on the first, the final norm and
// head on the last) and KV cache of its layers, per token and at full context.
void print_pipeline(const Model& model, const std::vector<LayerRange>& ranges, const KvTypes& kv_types) {
  const ModelConfig& c = model.config;
  fmt::print("pipeline:        {} stages; each holds its layers' weights and KV cache, and passes the next the "
             "hidden state of every token of a batch ({} floats, f32)\n",
             ranges.size(), c.d_model);
  for (size_t s = 0; s < ranges.size(); ++s) {
    const LayerRange& range = ranges[s];
    KvShape shape = c.kv_shape();
    shape.n_layers = range.size();
    const int64_t weights = stage_weight_bytes(model, range);
    const int64_t kv_per_token = KvCache::bytes_per_token(shape, kv_types);
    std::string ends;
    if (range.first == 0) ends += " + embedding";
    if (range.end == c.n_layers) ends += " + final norm and head";
    fmt::print("  stage {}:       layers [{}, {}){}: weights {} ({} bytes), KV {} bytes/token, {} at full context\n", s,
               range.first, range.end, ends, human_bytes(weights), weights, kv_per_token,
               human_bytes(kv_per_token * c.context_length));
  }
}

// --tensor-parallel T: what each rank (issue 36) holds, each slice loaded as that rank loads it
// (so a cut inside a quant block is refused here as at serve): its heads, FFN columns, weight
// bytes and KV cache of its own KV heads.
void print_tensor_parallel(const std::string& path, const ModelConfig& whole, int64_t n_ranks,
                           const KvTypes& kv_types) {
  fmt::print("tensor parallel: {} ranks; each holds its heads and FFN columns of every layer and the KV cache of its "
             "KV heads; two all-reduces of [tokens, {}] f32 a layer a step\n",
             n_ranks, whole.d_model);
  for (int64_t r = 0; r < n_ranks; ++r) {
    const std::shared_ptr<const Model> slice = load_model(path, {.tensor_slice = TensorSlice{r, n_ranks}});
    const TensorSliceShape s = tensor_slice_shape(whole, {r, n_ranks});
    const int64_t weights = slice->weight_bytes_total();
    const int64_t kv_per_token = KvCache::bytes_per_token(slice->kv_shape(), kv_types);
    fmt::print(
        "  rank {}:        query heads [{}, {}), KV heads [{}, {}), FFN columns [{}, {}){}: weights {} ({} bytes), "
        "KV {} bytes/token, {} at full context\n",
        r, s.q_head_first, s.q_head_first + s.n_q_heads, s.kv_head_first, s.kv_head_first + s.n_kv_heads, s.ffn_first,
        s.ffn_first + s.d_ff, r == 0 ? " + embedding, head" : " + embedding", human_bytes(weights), weights,
        kv_per_token, human_bytes(kv_per_token * whole.context_length));
  }
}

void print_info(const std::string& path, const KvTypes& kv_types, int64_t pipeline_stages, int64_t tensor_parallel) {
  std::shared_ptr<const Model> model = load_model(path);
  const ModelConfig& c = model->config;
  // Checked before anything is printed: a bad split is the whole answer.
  const std::vector<LayerRange> stages =
      pipeline_stages > 0 ? split_layers(c.n_layers, pipeline_stages) : std::vector<LayerRange>{};
  if (tensor_parallel > 0) tensor_slice_shape(c, {0, tensor_parallel});
  fmt::print("file:            {}\n", path);
  fmt::print("format:          {}\n", model->format);
  fmt::print("architecture:    {}\n", c.architecture);
  fmt::print("d_model:         {}\n", c.d_model);
  fmt::print("n_layers:        {}\n", c.n_layers);
  fmt::print("n_heads:         {}\n", c.n_heads);
  fmt::print("n_kv_heads:      {}{}\n", c.n_kv_heads, c.n_kv_heads < c.n_heads ? " (grouped-query attention)" : "");
  if (c.head_dim * c.n_heads == c.d_model)
    fmt::print("head_dim:        {}\n", c.head_dim);
  else  // Qwen3: a head size of its own
    fmt::print("head_dim:        {} (own size, not d_model / n_heads: Q width {} x {} = {}, d_model {})\n", c.head_dim,
               c.n_heads, c.head_dim, c.q_width(), c.d_model);
  fmt::print("d_ff:            {}{}\n", c.d_ff, c.has_experts() ? " (unused: every layer's FFN is experts)" : "");
  if (c.has_experts() && c.gpt_oss_experts) {
    fmt::print(
        "experts:         {} per layer, {} used per token, expert width {}; router (with bias) top {}, softmax over "
        "the chosen; clamped SwiGLU (alpha 1.702, limit 7) with biases\n",
        c.n_experts, c.n_experts_used, c.d_ff_expert, c.n_experts_used);
  } else if (c.has_experts()) {
    fmt::print("experts:         {} per layer, {} used per token, expert width {}; router softmax over all, top {}{}\n",
               c.n_experts, c.n_experts_used, c.d_ff_expert, c.n_experts_used,
               c.expert_weights_norm ? ", weights renormalised to sum 1" : ", weights not renormalised");
  }
  fmt::print("vocab_size:      {}\n", c.vocab_size);
  fmt::print("context_length:  {}\n", c.context_length);
  fmt::print("rms_norm_eps:    {}\n", c.rms_norm_eps);
  fmt::print("rope_freq_base:  {}\n", c.rope_freq_base);
  fmt::print("rope_dims:       {}\n", c.rope_dims);
  fmt::print("rope pairs:      {}\n", c.rope_pairing == RopePairing::HalfSplit
                                          ? "half-split (i, i + rope_dims/2; llama.cpp NEOX)"
                                          : "adjacent (2i, 2i+1; llama.cpp normal)");
  print_rope_scaling(c);
  if (c.qk_norm) fmt::print("q/k norm:        RMSNorm per head on Q and K before RoPE ([{}] weights)\n", c.head_dim);
  fmt::print("sliding window:  {}\n", describe_attention_window(c));
  if (c.gemma_blocks)
    fmt::print("gemma blocks:    GeGLU (tanh GELU), RMSNorm after attention and after the FFN, embeddings x sqrt({})\n",
               c.d_model);
  if (c.final_logit_softcap > 0.0f) fmt::print("logit softcap:   {}\n", c.final_logit_softcap);
  if (c.attention_sinks)
    fmt::print("attn sinks:      a learned logit per query head in each softmax's denominator (attn_sinks)\n");
  if (c.attn_logit_softcap > 0.0f)
    fmt::print("attn softcap:    {} (scores -> cap * tanh(score / cap))\n", c.attn_logit_softcap);
  const bool biases = !model->weights.layers.empty() && model->weights.layers[0].bq.data != nullptr;
  if (biases) fmt::print("qkv biases:      yes\n");
  fmt::print("output head:     {}\n", model->weights.output.data == model->weights.token_embedding.data
                                          ? "tied to token embeddings"
                                          : "separate");

  // Tensor types: count and bytes per type (a tied output head counted once).
  std::map<std::string, std::pair<int64_t, int64_t>> by_type;
  auto count = [&](const TensorView& view) {
    auto& [tensors, bytes] = by_type[std::string(dtype_name(view.dtype))];
    ++tensors;
    bytes += view.n_bytes();
  };
  const ModelWeights& w = model->weights;
  count(w.token_embedding);
  count(w.output_norm);
  if (w.output.data != w.token_embedding.data) count(w.output);
  for (const LayerWeights& layer : w.layers)
    for (const TensorView* view :
         {&layer.attn_norm, &layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.ffn_norm, &layer.w_gate, &layer.w_up,
          &layer.w_down, &layer.bq, &layer.bk, &layer.bv, &layer.q_norm, &layer.k_norm, &layer.post_attn_norm,
          &layer.post_ffn_norm, &layer.bo, &layer.sinks, &layer.router_bias})
      if (view->data != nullptr) count(*view);
  // Experts: one tensor per kind and layer, as a stacked file holds them (router counted as a tensor;
  // an old Mixtral file's separate per-expert tensors count as that one).
  for (const LayerWeights& layer : w.layers) {
    if (layer.router.data != nullptr) count(layer.router);
    for (const std::vector<TensorView>* experts :
         {&layer.expert_gate, &layer.expert_up, &layer.expert_down, &layer.expert_gate_bias, &layer.expert_up_bias,
          &layer.expert_down_bias}) {
      if (experts->empty()) continue;
      auto& [tensors, bytes] = by_type[std::string(dtype_name(experts->front().dtype))];
      ++tensors;
      for (const TensorView& view : *experts) bytes += view.n_bytes();
    }
  }
  for (const auto& [type, totals] : by_type)
    fmt::print("tensors {:<8} {} tensors, {} ({} bytes)\n", type + ":", totals.first, human_bytes(totals.second),
               totals.second);
  fmt::print("weights total:   {} ({} bytes)\n", human_bytes(model->weight_bytes_total()), model->weight_bytes_total());
  const KvShape shape = c.kv_shape();
  check_kv_types(shape, kv_types);
  const int64_t kv_per_token = KvCache::bytes_per_token(shape, kv_types);
  fmt::print("KV cache:        {} bytes/token ({}: 2 x {} layers x {}/{} bytes per row: {} kv heads x {} head dim, "
             "padded to whole 64-byte lines), {} at full context ({} tokens)\n",
             kv_per_token, kv_types_description(kv_types), c.n_layers, KvCache::row_bytes(shape, kv_types.k),
             KvCache::row_bytes(shape, kv_types.v), c.n_kv_heads, c.head_dim,
             human_bytes(kv_per_token * c.context_length), c.context_length);
  // Every type, for choosing one (K and V the same type).
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    const int64_t block = dtype_block_geometry(type).first;
    if (c.head_dim % block != 0) {
      fmt::print("  --kv-type {:<5} not available (head_dim {} is not a multiple of {})\n", kv_type_name(type),
                 c.head_dim, block);
      continue;
    }
    const int64_t per_token = KvCache::bytes_per_token(shape, {type, type});
    fmt::print("  --kv-type {:<5} {} bytes/token, {} at full context\n", kv_type_name(type), per_token,
               human_bytes(per_token * c.context_length));
  }
  // The paged pool `tandem serve` builds: 16-token blocks (its --kv-block default).
  const int64_t block_tokens = 16, blocks_per_context = (c.context_length + block_tokens - 1) / block_tokens;
  fmt::print("KV blocks:       {} tokens/block, {} bytes/block, {} blocks per full context (tandem serve "
             "allocates --parallel x this unless --kv-memory)\n",
             block_tokens, kv_per_token * block_tokens, blocks_per_context);
  if (c.kv_window() > 0) {
    // Blocks wholly behind the window go back to the pool as a sequence advances: what a
    // decoding sequence holds is the window's blocks plus the one being filled.
    const int64_t window_blocks = windowed_blocks_per_sequence(block_tokens, c.kv_window(), 1);
    fmt::print("KV kept:         the window only: at most {} blocks ({}) per decoding sequence\n", window_blocks,
               human_bytes(window_blocks * block_tokens * kv_per_token));
  }
  fmt::print("decode floor:    {} of weights read per token ({} bytes); tokens/s <= bandwidth / this\n",
             human_bytes(model->weight_bytes_per_token()), model->weight_bytes_per_token());
  if (!stages.empty()) print_pipeline(*model, stages, kv_types);
  if (tensor_parallel > 0) print_tensor_parallel(path, c, tensor_parallel, kv_types);
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto cpu = std::make_shared<bool>(false);
  auto kv_types = std::make_shared<KvTypeFlags>();
  CLI::App* command =
      app.add_subcommand("info", "Describe a model (shape, weight types and bytes, KV cost) or the CPU");
  command->add_option("-m,--model", *path, "Model file (.gguf or llama2.c model.bin)");
  command->add_flag("--cpu", *cpu, "Print the kernels chosen for this CPU and its features");
  auto device = std::make_shared<bool>(false);
  command->add_flag("--device", *device,
                    "Print the GPU (name, compute capability, memory) and its measured read bandwidth, or why there is "
                    "none");
  add_kv_type_options(command, kv_types.get());
  auto pipeline = std::make_shared<int64_t>(0);  // 0: not asked for
  CLI::Option* pipeline_option = command->add_option(
      "--pipeline", *pipeline,
      "Also print what each of S pipeline stages (layers split evenly) holds: layers, weight and KV "
      "bytes");
  auto tensor_parallel = std::make_shared<int64_t>(0);  // 0: not asked for
  command
      ->add_option("--tensor-parallel", *tensor_parallel,
                   "Also print what each of T tensor-parallel ranks holds: heads, FFN columns, weight and KV bytes")
      ->check(CLI::Range(int64_t{2}, int64_t{1024}));
  command->callback([path, cpu, device, kv_types, pipeline, pipeline_option, tensor_parallel] {
    // Checked here, not only where the model is read: --pipeline 0 must not pass as "not asked".
    if (pipeline_option->count() > 0)
      TANDEM_CHECK_INPUT(*pipeline >= 1, "--pipeline {} must be at least 1 (stages)", *pipeline);
    if (*cpu)
      fmt::print("{}; attention: {}{}\n", cpu_feature_summary(),
                 attention_arithmetic_name(kernel_table().attention_arithmetic),
                 kernel_table().attention_on_tiles ? " (amx tiles)" : "");
    if (*device) fmt::print("{}\n", device_summary());
    if (!path->empty()) print_info(*path, kv_types->resolve(), *pipeline, *tensor_parallel);
    if (!*cpu && !*device && path->empty()) throw InputError("info needs -m MODEL, --cpu or --device");
  });
}

}  // namespace tandem::cli
