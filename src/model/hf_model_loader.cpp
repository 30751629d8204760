// Loads a Hugging Face model folder (config.json + safetensors, single or sharded) of
// model_type llama / mistral / mixtral / qwen2 / qwen3 / qwen3_moe / gemma2 / gemma3_text / phi3 into a Model. Weights
// stay in the memory map in their stored type (F32/F16/BF16), except, for llama/mistral, q_proj/k_proj, which are
// copied with their rows permuted into the interleaved RoPE layout llama GGUFs use (see permute_rope_rows), and norms
// and biases, which are converted to f32. qwen2/qwen3/gemma2/gemma3/ phi3 keep HF's half-split rows, as their GGUFs do
// (RopePairing::HalfSplit); Phi-3's fused qkv_proj and gate_up_proj become row views. rope_scaling: model/rope_scaling.
// Gemma's RMSNorms scale by (1 + w): its norm weights get the 1 added at load, as llama.cpp's converter stores them, so
// both formats run plain RMSNorm on the same values. Experts (Qwen3MoeForCausalLM's mlp.gate +
// mlp.experts.E.{gate,up,down}_proj; MixtralForCausalLM's block_sparse_moe.gate + experts.E.{w1,w3,w2}) are one 2-D
// view per expert. GptOssForCausalLM (model_type gpt_oss): bf16/f32 experts (its stacked, transposed
// mlp.experts.gate_up_proj, gate and up columns interleaved, and down_proj) are copied into per-expert
// [rows, cols] matrices; the released checkpoints' MXFP4 experts (*_blocks/*_scales, U8) are repacked
// losslessly into per-expert MXFP4 matrices, the layout an MXFP4_MOE GGUF has (model/hf_gpt_oss_layer).
// Tensors are read through model/hf_tensor_reader: only F32/F16/BF16 ones as numbers, so U8 anywhere
// else is an error. Tokenizer files are not read here.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/safetensors_file.h"
#include "model/attention_window.h"
#include "model/hf_gpt_oss_layer.h"
#include "model/hf_tensor_reader.h"
#include "model/model.h"
#include "model/rope_scaling.h"
#include "model/weight_packing.h"

namespace tandem {
namespace {

using nlohmann::json;

// HF's Llama attention rotates each head as rotate_half does: element i pairs with element
// i + head_dim/2 (both at frequency index i). Our forward pass (like llama.cpp's GGUF files)
// pairs elements (2i, 2i+1). Reordering the output rows of Wq and Wk (and their biases) per
// head so that new row 2i = old row i and new row 2i+1 = old row i + head_dim/2 makes the
// two identical: the rotation acts on the same value pairs at the same frequencies, and
// q·k is unchanged because q and k get the same permutation. V and O are untouched.
// `rows` are [n_heads * head_dim] rows of `row_bytes` bytes each.
std::vector<uint8_t> permute_rope_rows(const uint8_t* rows, int64_t n_heads, int64_t head_dim, int64_t row_bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(n_heads * head_dim * row_bytes));
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t from = h * head_dim + j * half + i, to = h * head_dim + 2 * i + j;
        std::memcpy(out.data() + to * row_bytes, rows + from * row_bytes, static_cast<size_t>(row_bytes));
      }
  return out;
}

json read_json_file(const std::string& path) {
  std::ifstream stream(path);
  TANDEM_CHECK_INPUT(stream.good(), "cannot open '{}'", path);
  json value = json::parse(stream, nullptr, /*allow_exceptions=*/false);
  TANDEM_CHECK_INPUT(!value.is_discarded() && value.is_object(), "'{}' is not a well-formed JSON object", path);
  return value;
}

class HfModelBuilder {
 public:
  HfModelBuilder(const json& config, const SafetensorsCheckpoint& checkpoint, Model& model)
      : json_(config), checkpoint_(checkpoint), model_(model), reader_(checkpoint, model) {}

  void read_config() {
    const std::string type = string_or("model_type", "");
    TANDEM_CHECK_INPUT(
        type == "llama" || type == "mistral" || type == "mixtral" || type == "qwen2" || type == "qwen3" ||
            type == "qwen3_moe" || type == "gemma2" || type == "gemma3_text" || type == "phi3" || type == "gpt_oss",
        "config.json model_type '{}' is not supported (llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, "
        "gemma2, gemma3_text, phi3, gpt_oss)",
        type);
    ModelConfig& c = model_.config;
    // Mistral and Mixtral: a Llama layout (Mixtral with experts); Qwen3-MoE: llama.cpp's qwen3moe.
    c.architecture = type == "mistral" || type == "mixtral" ? "llama"
                     : type == "gemma3_text"                ? "gemma3"
                     : type == "qwen3_moe"                  ? "qwen3moe"
                     : type == "gpt_oss"                    ? "gpt-oss"
                                                            : type;
    // Qwen's GGUFs keep HF's half-split Q/K rows (llama.cpp's NEOX RoPE), so they are kept here
    // too: a converted file is then what llama.cpp expects, and both paths run the same rows.
    c.rope_pairing = c.architecture == "llama" ? RopePairing::Adjacent : RopePairing::HalfSplit;  // phi3: NEOX
    c.qk_norm = c.architecture == "qwen3" || c.architecture == "qwen3moe" || c.architecture == "gemma3";
    if (type == "mistral" || type == "mixtral") c.sliding_window = int_or("sliding_window", 0);
    c.d_model = required_int("hidden_size");
    c.n_layers = required_int("num_hidden_layers");
    c.n_heads = required_int("num_attention_heads");
    c.n_kv_heads = int_or("num_key_value_heads", c.n_heads);
    c.d_ff = required_int("intermediate_size");
    c.vocab_size = required_int("vocab_size");
    c.context_length = int_or("max_position_embeddings", 2048);
    c.rms_norm_eps = static_cast<float>(number_or("rms_norm_eps", 1e-6));
    c.rope_freq_base = static_cast<float>(number_or("rope_theta", 10000.0));
    // head_dim is its own value in Qwen3 (128 with hidden_size 1024 and 16 heads); older
    // configs leave it out and mean hidden_size / num_attention_heads.
    if (field("head_dim") != nullptr) {
      c.head_dim = int_or("head_dim", 0);
    } else {
      TANDEM_CHECK_INPUT(c.n_heads > 0 && c.d_model % c.n_heads == 0,
                         "config.json hidden_size {} is not a multiple of num_attention_heads {}", c.d_model,
                         c.n_heads);
      c.head_dim = c.d_model / c.n_heads;
    }
    // HF: int(head_dim x partial_rotary_factor) rotary dimensions (Phi-4-mini: 0.75 of 128).
    const double partial_rotary = number_or("partial_rotary_factor", 1.0);
    TANDEM_CHECK_INPUT(partial_rotary > 0.0 && partial_rotary <= 1.0,
                       "config.json partial_rotary_factor {} is outside (0, 1]", partial_rotary);
    c.rope_dims = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial_rotary);
    // permute_rope_rows reorders whole heads: partial rotation stays with the half-split layouts.
    TANDEM_CHECK_INPUT(c.rope_pairing == RopePairing::HalfSplit || c.rope_dims == c.head_dim,
                       "config.json partial_rotary_factor {} is not supported for model_type {}", partial_rotary, type);
    if (c.architecture == "gemma2") read_gemma2_config();
    if (c.architecture == "gemma3") read_gemma3_config();
    if (type == "qwen3_moe" || type == "mixtral") read_expert_config(type);
    if (type == "gpt_oss") read_gpt_oss_config();
    c.validate();
    c.rope_scaling = read_hf_rope_scaling(global_rope_.is_null() ? json_ : global_rope_, c.rope_dims, c.rope_freq_base,
                                          c.context_length, c.rope_freq_factors);
    if (c.architecture == "gemma3") {
      const bool llama3 = !c.rope_freq_factors.empty();
      TANDEM_CHECK_INPUT(
          !llama3 && (c.rope_scaling.type == RopeScalingType::None || c.rope_scaling.type == RopeScalingType::Linear),
          "config.json rope_scaling rope_type '{}' is not supported for gemma3 (linear only)",
          llama3 ? "llama3" : rope_scaling_type_name(c.rope_scaling.type));
    }
    c.validate();
  }

  void read_weights() {
    if (model_.config.gemma_blocks) return read_gemma3_weights();
    const ModelConfig& c = model_.config;
    ModelWeights& w = model_.weights;
    w.token_embedding = matrix("model.embed_tokens.weight", c.vocab_size, c.d_model);
    w.output_norm = vector("model.norm.weight", c.d_model);
    if (checkpoint_.find("lm_head.weight") != nullptr) {
      w.output = matrix("lm_head.weight", c.vocab_size, c.d_model);
    } else {
      const auto tie = json_.find("tie_word_embeddings");
      // Llama's default is untied; the head is then required.
      TANDEM_CHECK_INPUT(tie != json_.end() && tie->is_boolean() && tie->get<bool>(),
                         "missing tensor 'lm_head.weight' (and config.json does not set tie_word_embeddings)");
      w.output = w.token_embedding;
    }
    w.layers.resize(static_cast<size_t>(c.n_layers));
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string p = fmt::format("model.layers.{}.", l);
      LayerWeights& layer = w.layers[static_cast<size_t>(l)];
      layer.attn_norm = vector(p + "input_layernorm.weight", c.d_model);
      if (c.architecture == "phi3") {  // qkv_proj: Q, K, V rows one after the other; half-split as stored
        const TensorView qkv = matrix(p + "self_attn.qkv_proj.weight", c.q_width() + 2 * c.kv_width(), c.d_model);
        layer.wq = qkv.rows(0, c.q_width());
        layer.wk = qkv.rows(c.q_width(), c.kv_width());
        layer.wv = qkv.rows(c.q_width() + c.kv_width(), c.kv_width());
      } else {
        layer.wq = rope_matrix(p + "self_attn.q_proj.weight", c.n_heads);
        layer.wk = rope_matrix(p + "self_attn.k_proj.weight", c.n_kv_heads);
        layer.wv = matrix(p + "self_attn.v_proj.weight", c.kv_width(), c.d_model);
      }
      if (c.qk_norm) {  // [head_dim], applied to each head before RoPE: no permutation to undo
        layer.q_norm = vector(p + "self_attn.q_norm.weight", c.head_dim);
        layer.k_norm = vector(p + "self_attn.k_norm.weight", c.head_dim);
      }
      layer.wo = matrix(p + "self_attn.o_proj.weight", c.d_model, c.q_width());
      layer.ffn_norm = vector(p + "post_attention_layernorm.weight", c.d_model);
      if (c.gpt_oss_experts) {
        read_hf_gpt_oss_layer(reader_, c, mxfp4_config_, p, layer);
      } else if (c.has_experts()) {
        read_experts(p, layer);
      } else if (c.architecture == "phi3") {  // gate_up_proj: gate rows, then up rows (HF's chunk(2))
        const TensorView gate_up = matrix(p + "mlp.gate_up_proj.weight", 2 * c.d_ff, c.d_model);
        layer.w_gate = gate_up.rows(0, c.d_ff);
        layer.w_up = gate_up.rows(c.d_ff, c.d_ff);
      } else {
        layer.w_gate = matrix(p + "mlp.gate_proj.weight", c.d_ff, c.d_model);
        layer.w_up = matrix(p + "mlp.up_proj.weight", c.d_ff, c.d_model);
      }
      if (!c.has_experts()) layer.w_down = matrix(p + "mlp.down_proj.weight", c.d_model, c.d_ff);
      if (c.architecture == "qwen2" || checkpoint_.find(p + "self_attn.q_proj.bias") != nullptr) {
        layer.bq = rope_vector(p + "self_attn.q_proj.bias", c.n_heads);
        layer.bk = rope_vector(p + "self_attn.k_proj.bias", c.n_kv_heads);
        layer.bv = vector(p + "self_attn.v_proj.bias", c.kv_width());
      }
    }
  }

 private:
  // Qwen3MoeForCausalLM: num_experts of moe_intermediate_size, num_experts_per_tok, norm_topk_prob
  // (HF's default false; the released models set true); every layer sparse (decoder_sparse_step
  // 1, no mlp_only_layers), dense layers being refused. MixtralForCausalLM: num_local_experts of
  // intermediate_size, num_experts_per_tok, always renormalised.
  void read_expert_config(const std::string& type) {
    ModelConfig& c = model_.config;
    c.n_experts_used = required_int("num_experts_per_tok");
    if (type == "mixtral") {
      c.n_experts = required_int("num_local_experts");
      c.d_ff_expert = c.d_ff;
      c.expert_weights_norm = true;
    } else {
      c.n_experts = required_int("num_experts");
      c.d_ff_expert = required_int("moe_intermediate_size");
      const json* norm = field("norm_topk_prob");
      TANDEM_CHECK_INPUT(norm == nullptr || norm->is_boolean(), "config.json 'norm_topk_prob' is not a boolean");
      c.expert_weights_norm = norm != nullptr && norm->get<bool>();
      const int64_t sparse_step = int_or("decoder_sparse_step", 1);
      const json* dense_layers = field("mlp_only_layers");
      TANDEM_CHECK_INPUT(
          sparse_step == 1 && (dense_layers == nullptr || (dense_layers->is_array() && dense_layers->empty())),
          "config.json has layers without experts (decoder_sparse_step {}, mlp_only_layers {}): not "
          "supported",
          sparse_step, dense_layers == nullptr ? "[]" : dense_layers->dump());
    }
    TANDEM_CHECK_INPUT(c.n_experts > 0, "config.json expert count {} must be positive", c.n_experts);
  }

  // The router and each expert's three matrices, under the family's names.
  void read_experts(const std::string& p, LayerWeights& layer) {
    const ModelConfig& c = model_.config;
    const bool mixtral = c.architecture == "llama";
    const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
    layer.router = matrix(moe + "gate.weight", c.n_experts, c.d_model);
    for (int64_t e = 0; e < c.n_experts; ++e) {
      const std::string expert = fmt::format("{}experts.{}.", moe, e);
      layer.expert_gate.push_back(
          matrix(expert + (mixtral ? "w1.weight" : "gate_proj.weight"), c.d_ff_expert, c.d_model));
      layer.expert_up.push_back(matrix(expert + (mixtral ? "w3.weight" : "up_proj.weight"), c.d_ff_expert, c.d_model));
      layer.expert_down.push_back(
          matrix(expert + (mixtral ? "w2.weight" : "down_proj.weight"), c.d_model, c.d_ff_expert));
    }
  }

  // GptOssForCausalLM: num_local_experts of intermediate_size, num_experts_per_tok (older configs:
  // experts_per_token), sliding_window in the layers layer_types calls sliding_attention (the even
  // ones in the released models; llama.cpp can only say that pattern), swiglu_limit 7 (the
  // activation's constant). quantization_config: mxfp4 only (the released checkpoints: experts in
  // *_blocks/*_scales, model/hf_gpt_oss_layer), whose modules_to_not_convert are the bf16 tensors.
  void read_gpt_oss_config() {
    ModelConfig& c = model_.config;
    if (const json* quantization = field("quantization_config")) {
      const std::string method = quantization->is_object() && quantization->contains("quant_method") &&
                                         (*quantization)["quant_method"].is_string()
                                     ? (*quantization)["quant_method"].get<std::string>()
                                     : quantization->dump();
      TANDEM_CHECK_INPUT(method == "mxfp4",
                         "config.json quantization_config '{}' is not supported for gpt-oss (mxfp4, as released, or "
                         "no quantization_config for the bf16 layout)",
                         method.substr(0, 64));
      mxfp4_config_ = true;
    }
    c.gpt_oss_experts = true;
    c.attention_sinks = true;
    c.n_experts = required_int("num_local_experts");
    c.n_experts_used = field("num_experts_per_tok") != nullptr ? required_int("num_experts_per_tok")
                                                               : required_int("experts_per_token");
    c.d_ff_expert = c.d_ff;
    TANDEM_CHECK_INPUT(c.n_experts > 0, "config.json expert count {} must be positive", c.n_experts);
    const double limit = number_or("swiglu_limit", 7.0);
    TANDEM_CHECK_INPUT(limit == 7.0, "config.json swiglu_limit {} is not supported (7, as llama.cpp has it)", limit);
    c.sliding_window = required_int("sliding_window");
    TANDEM_CHECK_INPUT(c.sliding_window > 0, "config.json sliding_window {} must be positive", c.sliding_window);
    c.local_layers = local_layers_from_layer_types(2);
  }

  // Gemma3ForCausalLM's text config: windowed layers from layer_types ("sliding_attention" /
  // "full_attention") or, in older configs, every sliding_window_pattern-th layer global; the
  // local layers' RoPE base rope_local_base_freq; scores scaled by query_pre_attn_scalar^-1/2.
  void read_gemma3_config() {
    ModelConfig& c = model_.config;
    c.gemma_blocks = true;
    const std::string activation = string_or("hidden_activation", "gelu_pytorch_tanh");
    TANDEM_CHECK_INPUT(activation == "gelu_pytorch_tanh",
                       "config.json hidden_activation '{}' is not supported "
                       "(gelu_pytorch_tanh)",
                       activation);
    TANDEM_CHECK_INPUT(field("attn_logit_softcapping") == nullptr,
                       "config.json attn_logit_softcapping is not supported (Gemma 2's)");
    c.sliding_window = int_or("sliding_window", 0);
    if (c.sliding_window > 0) {
      c.local_layers = local_layers_from_layer_types(int_or("sliding_window_pattern", 6));
      c.rope_freq_base_local = static_cast<float>(number_or("rope_local_base_freq", 10000.0));
    }
    read_gemma3_rope_parameters();
    c.final_logit_softcap = static_cast<float>(number_or("final_logit_softcapping", 0.0));
    const double query_scalar = number_or("query_pre_attn_scalar", static_cast<double>(c.head_dim));
    TANDEM_CHECK_INPUT(query_scalar > 0.0 && query_scalar < 1e9, "config.json query_pre_attn_scalar {} is out of range",
                       query_scalar);
    if (query_scalar != static_cast<double>(c.head_dim))
      c.attention_scale = static_cast<float>(1.0 / std::sqrt(query_scalar));
  }

  // Gemma 3's RoPE: the global layers turn at rope_theta scaled by rope_scaling (4B and up:
  // linear, factor 8), the local ones at rope_local_base_freq unscaled — as HF's Gemma3 and
  // llama.cpp (its converter writes rope.scaling.type/factor, and its gemma3 layers with a
  // window keep a frequency scale of 1); the forward pass scales the global layers only.
  // Newer configs give both as rope_parameters per layer type, {"full_attention": {rope_type,
  // factor, rope_theta}, "sliding_attention": {...}}: read here into the same fields, the
  // global object kept for read_hf_rope_scaling.
  void read_gemma3_rope_parameters() {
    ModelConfig& c = model_.config;
    const json* parameters = field("rope_parameters");
    if (parameters == nullptr || !parameters->is_object() ||
        (!parameters->contains("full_attention") && !parameters->contains("sliding_attention")))
      return;
    auto layer_type = [&](const char* name) -> const json* {
      const auto it = parameters->find(name);
      if (it == parameters->end() || it->is_null()) return nullptr;
      TANDEM_CHECK_INPUT(it->is_object(), "config.json rope_parameters.{} is not an object", name);
      return &*it;
    };
    auto theta = [](const json& object, double fallback) {
      const auto it = object.find("rope_theta");
      if (it == object.end() || it->is_null()) return fallback;
      TANDEM_CHECK_INPUT(it->is_number(), "config.json rope_parameters rope_theta is not a number");
      return it->get<double>();
    };
    if (const json* global = layer_type("full_attention")) {
      c.rope_freq_base = static_cast<float>(theta(*global, c.rope_freq_base));
      global_rope_ = json{{"rope_scaling", *global}};
    } else {
      global_rope_ = json::object();  // no scaling: not a top-level rope_parameters either
    }
    const json* local = layer_type("sliding_attention");
    if (local != nullptr && c.sliding_window > 0) {
      const auto type = local->find("rope_type");
      const std::string name = type != local->end() && type->is_string() ? type->get<std::string>() : "default";
      TANDEM_CHECK_INPUT(name == "default",
                         "config.json rope_parameters.sliding_attention rope_type '{}' is not supported "
                         "(gemma3's local layers turn unscaled)",
                         name);
      c.rope_freq_base_local = static_cast<float>(theta(*local, c.rope_freq_base_local));
    }
  }

  // Gemma2ForCausalLM: even layers local (sliding_window; layer_types when the config lists
  // them), one RoPE base, scores scaled by query_pre_attn_scalar^-1/2 and soft-capped at
  // attn_logit_softcapping, logits at final_logit_softcapping (null: no cap).
  void read_gemma2_config() {
    ModelConfig& c = model_.config;
    c.gemma_blocks = true;
    const std::string activation = string_or("hidden_activation", "gelu_pytorch_tanh");
    TANDEM_CHECK_INPUT(activation == "gelu_pytorch_tanh",
                       "config.json hidden_activation '{}' is not supported (gelu_pytorch_tanh)", activation);
    c.sliding_window = int_or("sliding_window", 4096);
    TANDEM_CHECK_INPUT(c.sliding_window > 0, "config.json sliding_window {} must be positive", c.sliding_window);
    c.local_layers = local_layers_from_layer_types(2);
    // Absent: Gemma2Config's defaults (50, 30); null: no cap.
    auto softcap = [&](const char* key, double fallback) {
      const bool null = json_.contains(key) && json_[key].is_null();
      const double cap = null ? 0.0 : number_or(key, fallback);
      TANDEM_CHECK_INPUT(cap >= 0.0 && cap < 1e30, "config.json {} {} is out of range", key, cap);
      return static_cast<float>(cap);
    };
    c.attn_logit_softcap = softcap("attn_logit_softcapping", 50.0);
    c.final_logit_softcap = softcap("final_logit_softcapping", 30.0);
    const double query_scalar = number_or("query_pre_attn_scalar", static_cast<double>(c.head_dim));
    TANDEM_CHECK_INPUT(query_scalar > 0.0 && query_scalar < 1e9, "config.json query_pre_attn_scalar {} is out of range",
                       query_scalar);
    if (query_scalar != static_cast<double>(c.head_dim))
      c.attention_scale = static_cast<float>(1.0 / std::sqrt(query_scalar));
  }

  // Gemma 2's and 3's tensors (Q/K norms in gemma3 only): the post_attention_layernorm follows attention (the FFN's
  // input norm is pre_feedforward_layernorm), every norm weight w is used as 1 + w, and the head is tied unless
  // lm_head.weight is there (tie_word_embeddings defaults to true).
  void read_gemma3_weights() {
    const ModelConfig& c = model_.config;
    ModelWeights& w = model_.weights;
    w.token_embedding = matrix("model.embed_tokens.weight", c.vocab_size, c.d_model);
    w.output_norm = vector("model.norm.weight", c.d_model, 1.0f);
    w.output = checkpoint_.find("lm_head.weight") != nullptr ? matrix("lm_head.weight", c.vocab_size, c.d_model)
                                                             : w.token_embedding;
    w.layers.resize(static_cast<size_t>(c.n_layers));
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string p = fmt::format("model.layers.{}.", l);
      LayerWeights& layer = w.layers[static_cast<size_t>(l)];
      layer.attn_norm = vector(p + "input_layernorm.weight", c.d_model, 1.0f);
      layer.wq = matrix(p + "self_attn.q_proj.weight", c.q_width(), c.d_model);
      layer.wk = matrix(p + "self_attn.k_proj.weight", c.kv_width(), c.d_model);
      if (c.qk_norm) {  // gemma3; Gemma 2 has none
        layer.q_norm = vector(p + "self_attn.q_norm.weight", c.head_dim, 1.0f);
        layer.k_norm = vector(p + "self_attn.k_norm.weight", c.head_dim, 1.0f);
      }
      layer.wv = matrix(p + "self_attn.v_proj.weight", c.kv_width(), c.d_model);
      layer.wo = matrix(p + "self_attn.o_proj.weight", c.d_model, c.q_width());
      layer.post_attn_norm = vector(p + "post_attention_layernorm.weight", c.d_model, 1.0f);
      layer.ffn_norm = vector(p + "pre_feedforward_layernorm.weight", c.d_model, 1.0f);
      layer.w_gate = matrix(p + "mlp.gate_proj.weight", c.d_ff, c.d_model);
      layer.w_up = matrix(p + "mlp.up_proj.weight", c.d_ff, c.d_model);
      layer.w_down = matrix(p + "mlp.down_proj.weight", c.d_model, c.d_ff);
      layer.post_ffn_norm = vector(p + "post_feedforward_layernorm.weight", c.d_model, 1.0f);
    }
  }

  // Which layers are local: config.json's layer_types (one "sliding_attention" or
  // "full_attention" per layer) when it has them, else every `period`-th layer global.
  std::vector<uint8_t> local_layers_from_layer_types(int64_t period) const {
    const int64_t n_layers = model_.config.n_layers;
    const json* types = field("layer_types");
    if (types == nullptr) return interleaved_local_layers(n_layers, period);
    TANDEM_CHECK_INPUT(types->is_array() && static_cast<int64_t>(types->size()) == n_layers,
                       "config.json layer_types must list one type per layer ({})", n_layers);
    std::vector<uint8_t> local;
    for (const json& layer_type : *types) {
      TANDEM_CHECK_INPUT(layer_type == "sliding_attention" || layer_type == "full_attention",
                         "config.json layer_types holds {}, not sliding_attention or full_attention",
                         layer_type.dump());
      local.push_back(layer_type == "sliding_attention" ? 1 : 0);
    }
    return local;
  }

  const json* field(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }
  int64_t required_int(const char* key) const {
    TANDEM_CHECK_INPUT(field(key) != nullptr, "config.json is missing '{}'", key);
    return int_or(key, 0);
  }
  int64_t int_or(const char* key, int64_t fallback) const {
    const json* value = field(key);
    if (value == nullptr) return fallback;
    TANDEM_CHECK_INPUT(value->is_number_integer(), "config.json '{}' is not an integer", key);
    return value->get<int64_t>();
  }
  double number_or(const char* key, double fallback) const {
    const json* value = field(key);
    if (value == nullptr) return fallback;
    TANDEM_CHECK_INPUT(value->is_number(), "config.json '{}' is not a number", key);
    return value->get<double>();
  }
  std::string string_or(const char* key, const char* fallback) const {
    const json* value = field(key);
    if (value == nullptr) return fallback;
    TANDEM_CHECK_INPUT(value->is_string(), "config.json '{}' is not a string", key);
    return value->get<std::string>();
  }

  TensorView matrix(const std::string& name, int64_t rows, int64_t cols) { return reader_.matrix(name, rows, cols); }
  TensorView vector(const std::string& name, int64_t length, float offset = 0.0f) {
    return reader_.vector(name, length, offset);
  }

  // Wq / Wk: for adjacent pairing, rows permuted per head into the interleaved RoPE layout,
  // stored type kept; for half-split pairing, as stored.
  TensorView rope_matrix(const std::string& name, int64_t n_heads) {
    const ModelConfig& c = model_.config;
    const TensorView view = matrix(name, n_heads * c.head_dim, c.d_model);
    if (c.rope_pairing == RopePairing::HalfSplit) return view;
    return reader_.own(permute_rope_rows(static_cast<const uint8_t*>(view.data), n_heads, c.head_dim, view.row_bytes()),
                       view.dtype, view.dim(0), view.dim(1));
  }

  TensorView rope_vector(const std::string& name, int64_t n_heads) {
    const TensorView plain = vector(name, n_heads * model_.config.head_dim);
    if (model_.config.rope_pairing == RopePairing::HalfSplit) return plain;
    return reader_.own(
        permute_rope_rows(static_cast<const uint8_t*>(plain.data), n_heads, model_.config.head_dim, sizeof(float)),
        DType::F32, plain.dim(0), 0);
  }

  const json& json_;
  // gemma3's rope_parameters per layer type: {"rope_scaling": its full_attention object}, what
  // read_hf_rope_scaling reads instead of the top level (null: the top level).
  json global_rope_;
  bool mxfp4_config_ = false;  // gpt-oss's quantization_config says mxfp4
  const SafetensorsCheckpoint& checkpoint_;
  Model& model_;
  HfTensorReader reader_;
};

}  // namespace

ModelConfig read_hf_config(const std::string& dir) {
  Model model;
  try {
    const json config = read_json_file((std::filesystem::path(dir) / "config.json").string());
    // The builder reads through a checkpoint; opening one reads the safetensors headers, no tensor.
    SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir);
    HfModelBuilder(config, checkpoint, model).read_config();
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: {}", dir, error.what()));
  }
  return model.config;
}

std::shared_ptr<const Model> load_hf_model(const std::string& dir, const ModelLoadOptions& options) {
  auto model = std::make_shared<Model>();
  model->source_path = dir;
  model->format = "safetensors";
  try {
    // Its loader converts tensors (norms, permuted Q/K rows, experts) as it reads them, whichever
    // layer they are of: a stage would read the whole checkpoint anyway.
    TANDEM_CHECK_INPUT(
        !options.layers.has_value(),
        "a layer range (pipeline stage) needs a GGUF or llama2.c file; a Hugging Face folder loads whole "
        "(convert it with tandem convert)");
    TANDEM_CHECK_INPUT(!options.tensor_slice.has_value(),
                       "a tensor-parallel slice (--tensor-parallel) needs a GGUF or llama2.c file; a Hugging Face "
                       "folder loads whole (convert it with tandem convert)");
    const json config = read_json_file((std::filesystem::path(dir) / "config.json").string());
    SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir);
    HfModelBuilder builder(config, checkpoint, *model);
    builder.read_config();
    builder.read_weights();
    for (auto& mapping : checkpoint.mappings()) model->storage.push_back(mapping);
    // The layout the kernels read, as for GGUF, so a model gives the same bits in either
    // format. Shards and owned buffers stay as they are (no single mapping to release).
    pack_weights_for_kernels(*model, nullptr);
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: {}", dir, error.what()));
  }
  return model;
}

}  // namespace tandem
