// Test helper: gpt-oss Hugging Face folders (GptOssForCausalLM) written from the weights of a
// tests/support/random_model.h GGUF. The bf16 layout: HF's stacked, transposed experts
// (gate_up_proj [n_experts, d_model, 2 width] with gate and up in alternate columns, down_proj
// [n_experts, width, d_model]); or, with `mxfp4` set, the released checkpoints' layout: the
// experts' *_blocks / *_scales U8 tensors given, and quantization_config mxfp4. Either way the
// biases, self_attn.sinks, mlp.router with bias, layer_types and YaRN rope_scaling.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/hf_model_writer.h"
#include "support/random_model.h"

namespace tandem::test_support {

// One layer's experts as the released checkpoints store them (see HfMxfp4Tensor in
// src/model/hf_mxfp4.h for the layout).
struct GptOssMxfp4Layer {
  std::vector<uint8_t> gate_up_blocks;  // [n_experts, 2 width, d_model / 32, 16]
  std::vector<uint8_t> gate_up_scales;  // [n_experts, 2 width, d_model / 32]
  std::vector<uint8_t> down_blocks;     // [n_experts, d_model, width / 32, 16]
  std::vector<uint8_t> down_scales;     // [n_experts, d_model, width / 32]
};

struct GptOssFolderOptions {
  bool swap_gate_up = false;              // gate in the odd columns and up in the even ones (the wrong interleave)
  nlohmann::ordered_json extra_config{};  // keys set over config.json's (null values too)
  DType dtype = DType::F32;               // every float tensor's
  const std::vector<GptOssMxfp4Layer>* mxfp4 = nullptr;  // per layer: the MXFP4 layout
  // Last changes to the tensor list before it is written (malformed checkpoints).
  std::function<void(std::vector<NamedTensor>&)> edit{};
};

inline void write_gpt_oss_folder(const RandomModelSpec& s, const RandomWeights& w, const std::string& dir,
                                 const GptOssFolderOptions& options = {}) {
  const int64_t d = s.d_model, width = s.d_ff_expert, n = s.n_experts;
  nlohmann::ordered_json layer_types = nlohmann::ordered_json::array();
  for (int64_t l = 0; l < s.n_layers; ++l) layer_types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  nlohmann::ordered_json config = {{"model_type", "gpt_oss"},
                                   {"architectures", {"GptOssForCausalLM"}},
                                   {"hidden_size", d},
                                   {"num_hidden_layers", s.n_layers},
                                   {"num_attention_heads", s.n_heads},
                                   {"num_key_value_heads", s.n_kv_heads},
                                   {"head_dim", s.head_dim()},
                                   {"intermediate_size", width},
                                   {"num_local_experts", n},
                                   {"num_experts_per_tok", s.n_experts_used},
                                   {"sliding_window", s.sliding_window},
                                   {"layer_types", layer_types},
                                   {"vocab_size", s.vocab_size},
                                   {"max_position_embeddings", s.context_length},
                                   {"rms_norm_eps", s.rms_norm_eps},
                                   {"rope_theta", s.rope_freq_base},
                                   {"rope_scaling",
                                    {{"rope_type", "yarn"},
                                     {"factor", s.yarn_factor},
                                     {"original_max_position_embeddings", s.yarn_original},
                                     {"beta_fast", 32.0},
                                     {"beta_slow", 1.0}}},
                                   {"swiglu_limit", 7.0},
                                   {"tie_word_embeddings", false}};
  if (options.mxfp4 != nullptr)  // as the released config.json has it
    config["quantization_config"] = {
        {"quant_method", "mxfp4"},
        {"modules_to_not_convert",
         {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"}}};
  if (options.extra_config.is_object())
    for (auto it = options.extra_config.begin(); it != options.extra_config.end(); ++it) config[it.key()] = it.value();
  write_text(dir + "/config.json", config.dump(2));
  write_text(dir + "/tokenizer.json", tiny_tokenizer_json());

  std::deque<std::vector<float>> values;  // alive until written
  std::vector<NamedTensor> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    values.push_back(std::move(data));
    tensors.push_back({name, std::move(shape), &values.back()});
  };
  add("model.embed_tokens.weight", {s.vocab_size, d}, w.token_embedding.values);
  add("model.norm.weight", {d}, w.output_norm);
  add("lm_head.weight", {s.vocab_size, d}, w.output.values);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const RandomLayer& layer = w.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {d}, layer.attn_norm);
    add(p + "post_attention_layernorm.weight", {d}, layer.ffn_norm);
    add(p + "self_attn.q_proj.weight", {layer.wq.rows, d}, layer.wq.values);
    add(p + "self_attn.q_proj.bias", {layer.wq.rows}, layer.bq);
    add(p + "self_attn.k_proj.weight", {layer.wk.rows, d}, layer.wk.values);
    add(p + "self_attn.k_proj.bias", {layer.wk.rows}, layer.bk);
    add(p + "self_attn.v_proj.weight", {layer.wv.rows, d}, layer.wv.values);
    add(p + "self_attn.v_proj.bias", {layer.wv.rows}, layer.bv);
    add(p + "self_attn.o_proj.weight", {d, layer.wo.cols}, layer.wo.values);
    add(p + "self_attn.o_proj.bias", {d}, layer.bo);
    add(p + "self_attn.sinks", {s.n_heads}, layer.sinks);
    add(p + "mlp.router.weight", {n, d}, layer.router.values);
    add(p + "mlp.router.bias", {n}, layer.router_bias);
    // [n, d, 2 width]: element (e, k, 2j) = gate_e[j][k], (e, k, 2j + 1) = up_e[j][k].
    std::vector<float> gate_up(static_cast<size_t>(n * d * 2 * width)),
        gate_up_bias(static_cast<size_t>(n * 2 * width));
    std::vector<float> down(static_cast<size_t>(n * width * d)), down_bias(static_cast<size_t>(n * d));
    const int gate_column = options.swap_gate_up ? 1 : 0;
    for (int64_t e = 0; e < n; ++e) {
      const auto ex = static_cast<size_t>(e);
      for (int64_t j = 0; j < width; ++j) {
        for (int64_t k = 0; k < d; ++k) {
          gate_up[(e * d + k) * 2 * width + 2 * j + gate_column] = layer.expert_gate[ex].at(j, k);
          gate_up[(e * d + k) * 2 * width + 2 * j + 1 - gate_column] = layer.expert_up[ex].at(j, k);
          down[(e * width + j) * d + k] = layer.expert_down[ex].at(k, j);
        }
        gate_up_bias[e * 2 * width + 2 * j + gate_column] = layer.expert_gate_bias[ex][j];
        gate_up_bias[e * 2 * width + 2 * j + 1 - gate_column] = layer.expert_up_bias[ex][j];
      }
      for (int64_t k = 0; k < d; ++k) down_bias[e * d + k] = layer.expert_down_bias[ex][k];
    }
    if (options.mxfp4 != nullptr) {
      const GptOssMxfp4Layer& q = (*options.mxfp4)[static_cast<size_t>(l)];
      const std::string experts = p + "mlp.experts.";
      tensors.push_back({experts + "gate_up_proj_blocks", {n, 2 * width, d / 32, 16}, nullptr, &q.gate_up_blocks});
      tensors.push_back({experts + "gate_up_proj_scales", {n, 2 * width, d / 32}, nullptr, &q.gate_up_scales});
      tensors.push_back({experts + "down_proj_blocks", {n, d, width / 32, 16}, nullptr, &q.down_blocks});
      tensors.push_back({experts + "down_proj_scales", {n, d, width / 32}, nullptr, &q.down_scales});
    } else {
      add(p + "mlp.experts.gate_up_proj", {n, d, 2 * width}, std::move(gate_up));
      add(p + "mlp.experts.down_proj", {n, width, d}, std::move(down));
    }
    add(p + "mlp.experts.gate_up_proj_bias", {n, 2 * width}, std::move(gate_up_bias));
    add(p + "mlp.experts.down_proj_bias", {n, d}, std::move(down_bias));
  }
  if (options.edit) options.edit(tensors);
  write_bytes(dir + "/model.safetensors", safetensors_bytes(tensors, options.dtype, false));
}

}  // namespace tandem::test_support
