// Model-wide helpers: config validation, weight byte accounting, and picking the loader (or
// the configuration reader) by file format (a folder, GGUF magic, else a llama2.c checkpoint).
#include "model/model.h"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "model/attention_window.h"

namespace tandem {

double ModelConfig::attention_depth_equivalent() const {
  int64_t global_layers = 0;
  for (int64_t l = 0; l < n_layers; ++l) global_layers += layer_window(l) == 0;
  if (global_layers == 0) return 0.0;
  const int64_t ffn =
      has_experts() ? n_experts_used * 3 * d_model * d_ff_expert + n_experts * d_model : 3 * d_model * d_ff;
  const double weights_per_token =
      static_cast<double>(n_layers) * static_cast<double>(d_model * (2 * q_width() + 2 * kv_width()) + ffn);
  const double attention_per_position = 2.0 * static_cast<double>(global_layers * n_heads * head_dim);
  return weights_per_token / attention_per_position;
}

void ModelConfig::validate() const {
  auto positive = [](int64_t value, const char* name) {
    TANDEM_CHECK_INPUT(value > 0 && value <= (int64_t{1} << 24), "model {} is {}, expected 1..16M", name, value);
  };
  positive(d_model, "embedding width");
  positive(n_layers, "layer count");
  positive(n_heads, "head count");
  positive(n_kv_heads, "KV head count");
  positive(d_ff, "feed-forward width");
  positive(vocab_size, "vocabulary size");
  positive(context_length, "context length");
  positive(head_dim, "head size");
  TANDEM_CHECK_INPUT(n_heads % n_kv_heads == 0, "head count {} is not a multiple of the KV head count {}", n_heads,
                     n_kv_heads);
  TANDEM_CHECK_INPUT(rope_dims > 0 && rope_dims <= head_dim && rope_dims % 2 == 0,
                     "RoPE dimension count {} must be even and at most the head size {}", rope_dims, head_dim);
  TANDEM_CHECK_INPUT(rms_norm_eps > 0.0f && rms_norm_eps < 1.0f, "RMSNorm epsilon {} is out of range", rms_norm_eps);
  TANDEM_CHECK_INPUT(rope_freq_factors.empty() || static_cast<int64_t>(rope_freq_factors.size()) == rope_dims / 2,
                     "{} RoPE frequency factors for {} rotary pairs", rope_freq_factors.size(), rope_dims / 2);
  for (float factor : rope_freq_factors)
    TANDEM_CHECK_INPUT(factor > 0.0f && factor < 1e30f, "RoPE frequency factor {} is out of range", factor);
  TANDEM_CHECK_INPUT(rope_freq_base > 1.0f, "RoPE frequency base {} is out of range", rope_freq_base);
  if (n_experts != 0 || n_experts_used != 0) {
    TANDEM_CHECK_INPUT(n_experts > 0 && n_experts <= 4096, "expert count {} is out of range (1..4096)", n_experts);
    TANDEM_CHECK_INPUT(n_experts_used > 0 && n_experts_used <= n_experts,
                       "experts used per token {} is outside 1..{} (the expert count)", n_experts_used, n_experts);
    positive(d_ff_expert, "expert feed-forward width");
  }
  validate_attention_window(*this);
  rope_scaling.validate(rope_dims);
  TANDEM_CHECK_INPUT(rope_freq_factors.empty() || rope_scaling.type != RopeScalingType::LongRope,
                     "both rope_freqs.weight and LongRoPE factors (a model has one set of frequency divisors)");
}

int64_t layer_weight_bytes(const LayerWeights& layer) {
  int64_t total = 0;
  for (const TensorView* view :
       {&layer.attn_norm, &layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.ffn_norm, &layer.w_gate, &layer.w_up,
        &layer.w_down, &layer.bq, &layer.bk, &layer.bv, &layer.q_norm, &layer.k_norm, &layer.post_attn_norm,
        &layer.post_ffn_norm, &layer.bo, &layer.sinks, &layer.router_bias})
    if (view->data != nullptr) total += view->n_bytes();
  if (layer.router.data != nullptr) total += layer.router.n_bytes();
  for (const std::vector<TensorView>* experts :
       {&layer.expert_gate, &layer.expert_up, &layer.expert_down, &layer.expert_gate_bias, &layer.expert_up_bias,
        &layer.expert_down_bias})
    for (const TensorView& view : *experts) total += view.n_bytes();
  return total;
}

int64_t Model::weight_bytes_total() const {
  // A stage holds the embedding, the final norm and the head only at its ends: null views otherwise.
  int64_t total = 0;
  if (weights.token_embedding.data != nullptr) total += weights.token_embedding.n_bytes();
  if (weights.output_norm.data != nullptr) total += weights.output_norm.n_bytes();
  if (weights.output.data != nullptr && weights.output.data != weights.token_embedding.data)
    total += weights.output.n_bytes();
  for (const LayerWeights& layer : weights.layers) total += layer_weight_bytes(layer);
  return total;
}

int64_t Model::weight_bytes_per_token() const {
  // Every matrix is read once per decode step; of the embedding table only one row.
  int64_t total = weight_bytes_total();
  if (weights.token_embedding.data != nullptr) {
    total += weights.token_embedding.row_bytes() - weights.token_embedding.n_bytes();
    if (weights.output.data == weights.token_embedding.data) total += weights.output.n_bytes();
  }
  // A token reads n_experts_used of each layer's experts (all of the same size).
  for (const LayerWeights& layer : weights.layers)
    for (const std::vector<TensorView>* experts :
         {&layer.expert_gate, &layer.expert_up, &layer.expert_down, &layer.expert_gate_bias, &layer.expert_up_bias,
          &layer.expert_down_bias})
      if (!experts->empty())
        total -= (static_cast<int64_t>(experts->size()) - config.n_experts_used) * experts->front().n_bytes();
  return total;
}

namespace {

enum class ModelFormat { Gguf, HfFolder, Llama2c };

ModelFormat model_format(const std::string& path) {
  if (std::filesystem::is_directory(path)) return ModelFormat::HfFolder;
  // A .gguf name is a promise of the format: let the GGUF reader say what is wrong with it.
  if (path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0) return ModelFormat::Gguf;
  std::FILE* file = std::fopen(path.c_str(), "rb");
  TANDEM_CHECK_INPUT(file != nullptr, "cannot open model '{}': {}", path, std::strerror(errno));
  char magic[4] = {};
  const size_t got = std::fread(magic, 1, 4, file);
  std::fclose(file);
  return got == 4 && std::memcmp(magic, "GGUF", 4) == 0 ? ModelFormat::Gguf : ModelFormat::Llama2c;
}

}  // namespace

std::shared_ptr<const Model> load_model(const std::string& path, const ModelLoadOptions& options) {
  switch (model_format(path)) {
    case ModelFormat::HfFolder: return load_hf_model(path, options);
    case ModelFormat::Gguf: return load_gguf_model(path, options);
    case ModelFormat::Llama2c: break;
  }
  return load_llama2c_model(path, options);
}

ModelConfig read_model_config(const std::string& path) {
  switch (model_format(path)) {
    case ModelFormat::HfFolder: return read_hf_config(path);
    case ModelFormat::Gguf: return read_gguf_config(path);
    case ModelFormat::Llama2c: break;
  }
  return read_llama2c_config(path);
}

}  // namespace tandem
