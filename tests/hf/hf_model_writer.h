// Test helper: small random models written as Hugging Face folders — config.json, safetensors
// (one file, or shards plus model.safetensors.index.json) and a tiny tokenizer.json — in the
// HF layout: Q/K rows for the half-split RoPE (element i pairs with i + head_dim/2); Qwen3's
// per-head q_norm/k_norm and its own head_dim; Phi-3's fused qkv_proj and gate_up_proj, any
// rope_scaling object and partial_rotary_factor. Also the inverse of the loader's permutation, to
// write a GGUF-layout model the HF way.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <deque>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/quant.h"
#include "support/random_model.h"

namespace tandem::test_support {

struct Llama3Scaling {
  double factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_context = 32;  // wavelengths < 8 unchanged, > 32 slowed by factor
};

struct HfModelSpec {
  std::string model_type = "llama";  // llama, mistral, qwen2 (biases), qwen3 (q/k norms), phi3 (fused)
  int64_t d_model = 48, n_layers = 2, n_heads = 4, n_kv_heads = 2, d_ff = 40, vocab_size = 67, context_length = 64;
  bool tied = false;
  DType dtype = DType::F32;  // F32, F16 or BF16, every tensor
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  std::optional<Llama3Scaling> rope_scaling;
  // Written as config.json's rope_scaling when not null (linear, yarn, longrope, ...).
  nlohmann::ordered_json rope_scaling_json;
  double partial_rotary_factor = 0.0;            // > 0: written (rotary dims = head_dim x this)
  int64_t original_max_position_embeddings = 0;  // > 0: written at the top level (Phi-3)
  int n_shards = 1;                              // > 1: model-0000N-of-0000M.safetensors + index
  bool unaligned = false;                        // header not padded, so tensor data is misaligned in the map
  uint32_t seed = 7;
  int64_t head_size = 0;  // > 0: config.json head_dim (Qwen3), else hidden_size / heads
  // Mixture of experts, model_type qwen3_moe (experts moe_width wide, norm_topk_prob) or mixtral
  // (experts d_ff wide, always renormalised), when n_experts > 0.
  int64_t n_experts = 0, n_experts_used = 0, moe_width = 0;
  bool norm_topk_prob = true;
  nlohmann::ordered_json mlp_only_layers = nlohmann::ordered_json::array();

  int64_t head_dim() const { return head_size > 0 ? head_size : d_model / n_heads; }
  bool biases() const { return model_type == "qwen2"; }
  bool qk_norm() const { return model_type == "qwen3" || model_type == "qwen3_moe"; }
  int64_t expert_width() const { return model_type == "qwen3_moe" ? moe_width : d_ff; }
};

// Weights as the HF files hold them (after rounding through the stored type), HF layout.
struct HfLayer {
  std::vector<float> attn_norm, ffn_norm, bq, bk, bv;  // biases empty without them
  RandomMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  std::vector<float> q_norm, k_norm;  // [head_dim], Qwen3; empty without
  RandomMatrix router;                // [n_experts, d_model]; experts' matrices as HF names them
  std::vector<RandomMatrix> expert_gate, expert_up, expert_down;
};
struct HfWeights {
  RandomMatrix embed, lm_head;  // lm_head is a copy of embed when tied
  std::vector<float> norm;
  std::vector<HfLayer> layers;
};

namespace hf_detail {

inline void round_through(DType dtype, std::vector<float>& values) {
  std::vector<uint8_t> bytes(static_cast<size_t>(dtype_row_bytes(dtype, static_cast<int64_t>(values.size()))));
  quantize_row(dtype, values.data(), bytes.data(), static_cast<int64_t>(values.size()));
  dequantize_row(dtype, bytes.data(), values.data(), static_cast<int64_t>(values.size()));
}

inline std::vector<float> uniform(std::mt19937& rng, size_t n, float lo, float hi, DType dtype) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  round_through(dtype, values);
  return values;
}

inline RandomMatrix matrix(std::mt19937& rng, int64_t rows, int64_t cols, DType dtype, float scale) {
  return {rows, cols, uniform(rng, static_cast<size_t>(rows * cols), -scale, scale, dtype)};
}

}  // namespace hf_detail

inline HfWeights random_hf_weights(const HfModelSpec& s) {
  std::mt19937 rng(s.seed);
  const int64_t d = s.d_model, q = s.n_heads * s.head_dim(), kv = s.n_kv_heads * s.head_dim();
  auto fan_in = [](int64_t n) { return 1.7f / std::sqrt(static_cast<float>(n)); };
  auto norm = [&] { return hf_detail::uniform(rng, static_cast<size_t>(d), 0.7f, 1.3f, s.dtype); };
  HfWeights w;
  w.embed = hf_detail::matrix(rng, s.vocab_size, d, s.dtype, 1.0f);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    HfLayer layer;
    layer.attn_norm = norm();
    layer.wq = hf_detail::matrix(rng, q, d, s.dtype, fan_in(d));
    layer.wk = hf_detail::matrix(rng, kv, d, s.dtype, fan_in(d));
    layer.wv = hf_detail::matrix(rng, kv, d, s.dtype, fan_in(d));
    layer.wo = hf_detail::matrix(rng, d, q, s.dtype, fan_in(q));
    layer.ffn_norm = norm();
    if (s.n_experts > 0) {
      const int64_t width = s.expert_width();
      layer.router = hf_detail::matrix(rng, s.n_experts, d, s.dtype, 3.0f * fan_in(d));
      for (int64_t e = 0; e < s.n_experts; ++e) {
        layer.expert_gate.push_back(hf_detail::matrix(rng, width, d, s.dtype, fan_in(d)));
        layer.expert_up.push_back(hf_detail::matrix(rng, width, d, s.dtype, fan_in(d)));
        layer.expert_down.push_back(hf_detail::matrix(rng, d, width, s.dtype, fan_in(width)));
      }
    } else {
      layer.w_gate = hf_detail::matrix(rng, s.d_ff, d, s.dtype, fan_in(d));
      layer.w_up = hf_detail::matrix(rng, s.d_ff, d, s.dtype, fan_in(d));
      layer.w_down = hf_detail::matrix(rng, d, s.d_ff, s.dtype, fan_in(s.d_ff));
    }
    if (s.biases()) {
      layer.bq = hf_detail::uniform(rng, static_cast<size_t>(q), -0.5f, 0.5f, s.dtype);
      layer.bk = hf_detail::uniform(rng, static_cast<size_t>(kv), -0.5f, 0.5f, s.dtype);
      layer.bv = hf_detail::uniform(rng, static_cast<size_t>(kv), -0.5f, 0.5f, s.dtype);
    }
    if (s.qk_norm()) {
      layer.q_norm = hf_detail::uniform(rng, static_cast<size_t>(s.head_dim()), 0.7f, 1.3f, s.dtype);
      layer.k_norm = hf_detail::uniform(rng, static_cast<size_t>(s.head_dim()), 0.7f, 1.3f, s.dtype);
    }
    w.layers.push_back(std::move(layer));
  }
  w.norm = norm();
  w.lm_head = s.tied ? w.embed : hf_detail::matrix(rng, s.vocab_size, d, s.dtype, fan_in(d));
  return w;
}

// Interleaved layout (rows 2i, 2i+1 of a head rotate together) -> HF half-split layout
// (rows i, i + head_dim/2): HF row h*hd + j*hd/2 + i = interleaved row h*hd + 2i + j.
// Written independently of the loader's permutation so a test can check one against the other.
inline std::vector<float> to_half_split(const std::vector<float>& rows, int64_t n_heads, int64_t head_dim,
                                        int64_t cols) {
  std::vector<float> out(rows.size());
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t r = 0; r < head_dim; ++r) {
      const int64_t hf_row = h * head_dim + (r % 2) * (head_dim / 2) + r / 2;
      std::memcpy(out.data() + hf_row * cols, rows.data() + (h * head_dim + r) * cols, sizeof(float) * cols);
    }
  return out;
}

// The same model in HF layout as a GGUF-layout RandomWeights (tests/support/random_model.h).
inline HfWeights hf_weights_from_gguf_layout(const RandomWeights& g, const HfModelSpec& s) {
  HfWeights w;
  w.embed = g.token_embedding;
  w.lm_head = g.output;
  w.norm = g.output_norm;
  for (const RandomLayer& gl : g.layers) {
    HfLayer layer{gl.attn_norm, gl.ffn_norm, {},        {}, {}, gl.wq, gl.wk, gl.wv, gl.wo,
                  gl.w_gate,    gl.w_up,     gl.w_down, {}, {}, {},    {},    {},    {}};
    layer.q_norm = gl.q_norm, layer.k_norm = gl.k_norm;
    layer.router = gl.router;
    layer.expert_gate = gl.expert_gate, layer.expert_up = gl.expert_up, layer.expert_down = gl.expert_down;
    if (s.qk_norm()) {  // Qwen's rows are half-split in both layouts
      w.layers.push_back(std::move(layer));
      continue;
    }
    layer.wq.values = to_half_split(gl.wq.values, s.n_heads, s.head_dim(), s.d_model);
    layer.wk.values = to_half_split(gl.wk.values, s.n_kv_heads, s.head_dim(), s.d_model);
    w.layers.push_back(std::move(layer));
  }
  return w;
}

// Raw safetensors bytes of named float tensors stored as `dtype`, and of U8 tensors (`bytes`
// set, written as they are: gpt-oss's MXFP4 blocks and scales).
struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  const std::vector<float>* values;
  const std::vector<uint8_t>* bytes = nullptr;  // U8 when set (values unused)
};

inline std::vector<uint8_t> safetensors_bytes(const std::vector<NamedTensor>& tensors, DType dtype, bool unaligned) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<uint8_t> data;
  const char* dtype_name = dtype == DType::F32 ? "F32" : dtype == DType::F16 ? "F16" : "BF16";
  for (const NamedTensor& t : tensors) {
    if (t.bytes != nullptr) {
      const size_t begin = data.size();
      data.insert(data.end(), t.bytes->begin(), t.bytes->end());
      header[t.name] = {{"dtype", "U8"}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
      continue;
    }
    const auto n = static_cast<int64_t>(t.values->size());
    const size_t begin = data.size();
    data.resize(begin + static_cast<size_t>(dtype_row_bytes(dtype, n)));
    quantize_row(dtype, t.values->data(), data.data() + begin, n);
    header[t.name] = {{"dtype", dtype_name}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  if (unaligned) {
    if ((8 + text.size()) % 4 == 0) text += ' ';
  } else {
    while ((8 + text.size()) % 8 != 0) text += ' ';  // as HF pads it
  }
  // Sized once and copied into (vector::insert here trips GCC 12's false -Warray-bounds).
  std::vector<uint8_t> bytes(8 + text.size() + data.size());
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  std::copy(text.begin(), text.end(), bytes.begin() + 8);
  std::copy(data.begin(), data.end(), bytes.begin() + 8 + static_cast<std::ptrdiff_t>(text.size()));
  return bytes;
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A byte-level BPE tokenizer.json over a few tokens, plus a special token.
inline std::string tiny_tokenizer_json() {
  nlohmann::ordered_json tokenizer;
  tokenizer["model"] = {{"type", "BPE"},
                        {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"abc", 4}, {"\xc4\xa0", 5}}},
                        {"merges", {"a b", "ab c"}}};
  tokenizer["added_tokens"] = {{{"id", 6}, {"content", "<|end|>"}, {"special", true}}};
  tokenizer["pre_tokenizer"] = {{"type", "ByteLevel"}};
  return tokenizer.dump(2);
}

inline void write_hf_model(const HfModelSpec& s, const HfWeights& w, const std::string& dir) {
  nlohmann::ordered_json config = {{"model_type", s.model_type},
                                   {"architectures",
                                    {s.model_type == "qwen2"       ? "Qwen2ForCausalLM"
                                     : s.model_type == "qwen3"     ? "Qwen3ForCausalLM"
                                     : s.model_type == "qwen3_moe" ? "Qwen3MoeForCausalLM"
                                     : s.model_type == "mixtral"   ? "MixtralForCausalLM"
                                     : s.model_type == "phi3"      ? "Phi3ForCausalLM"
                                                                   : "LlamaForCausalLM"}},
                                   {"hidden_size", s.d_model},
                                   {"num_hidden_layers", s.n_layers},
                                   {"num_attention_heads", s.n_heads},
                                   {"num_key_value_heads", s.n_kv_heads},
                                   {"intermediate_size", s.d_ff},
                                   {"rms_norm_eps", s.rms_norm_eps},
                                   {"rope_theta", s.rope_theta},
                                   {"max_position_embeddings", s.context_length},
                                   {"vocab_size", s.vocab_size},
                                   {"tie_word_embeddings", s.tied},
                                   {"bos_token_id", 4},
                                   {"eos_token_id", 6},
                                   {"rope_scaling", nullptr}};
  if (s.head_size > 0) config["head_dim"] = s.head_size;
  if (s.rope_scaling)
    config["rope_scaling"] = {{"rope_type", "llama3"},
                              {"factor", s.rope_scaling->factor},
                              {"low_freq_factor", s.rope_scaling->low_freq_factor},
                              {"high_freq_factor", s.rope_scaling->high_freq_factor},
                              {"original_max_position_embeddings", s.rope_scaling->original_context}};
  if (!s.rope_scaling_json.is_null()) config["rope_scaling"] = s.rope_scaling_json;
  if (s.partial_rotary_factor > 0.0) config["partial_rotary_factor"] = s.partial_rotary_factor;
  if (s.original_max_position_embeddings > 0)
    config["original_max_position_embeddings"] = s.original_max_position_embeddings;
  if (s.model_type == "qwen3_moe") {
    config["num_experts"] = s.n_experts;
    config["num_experts_per_tok"] = s.n_experts_used;
    config["moe_intermediate_size"] = s.moe_width;
    config["norm_topk_prob"] = s.norm_topk_prob;
    config["decoder_sparse_step"] = 1;
    config["mlp_only_layers"] = s.mlp_only_layers;
  }
  if (s.model_type == "mixtral") {
    config["num_local_experts"] = s.n_experts;
    config["num_experts_per_tok"] = s.n_experts_used;
    config["sliding_window"] = nullptr;
  }
  write_text(dir + "/config.json", config.dump(2));
  write_text(dir + "/tokenizer.json", tiny_tokenizer_json());

  std::vector<NamedTensor> tensors;
  std::deque<std::vector<float>> joined;  // Phi-3's fused tensors, alive until written
  auto join = [&](std::initializer_list<const RandomMatrix*> parts) -> const std::vector<float>& {
    std::vector<float>& out = joined.emplace_back();
    for (const RandomMatrix* part : parts) out.insert(out.end(), part->values.begin(), part->values.end());
    return out;
  };
  auto mat = [&](const std::string& name, const RandomMatrix& m) {
    tensors.push_back({name, {m.rows, m.cols}, &m.values});
  };
  auto vec = [&](const std::string& name, const std::vector<float>& v) {
    tensors.push_back({name, {static_cast<int64_t>(v.size())}, &v});
  };
  mat("model.embed_tokens.weight", w.embed);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const HfLayer& layer = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    vec(p + "input_layernorm.weight", layer.attn_norm);
    if (s.model_type == "phi3") {  // rows: Q, then K, then V
      tensors.push_back({p + "self_attn.qkv_proj.weight",
                         {layer.wq.rows + layer.wk.rows + layer.wv.rows, layer.wq.cols},
                         &join({&layer.wq, &layer.wk, &layer.wv})});
    } else {
      mat(p + "self_attn.q_proj.weight", layer.wq);
      mat(p + "self_attn.k_proj.weight", layer.wk);
      mat(p + "self_attn.v_proj.weight", layer.wv);
    }
    mat(p + "self_attn.o_proj.weight", layer.wo);
    if (!layer.bq.empty()) {
      vec(p + "self_attn.q_proj.bias", layer.bq);
      vec(p + "self_attn.k_proj.bias", layer.bk);
      vec(p + "self_attn.v_proj.bias", layer.bv);
    }
    if (!layer.q_norm.empty()) {
      vec(p + "self_attn.q_norm.weight", layer.q_norm);
      vec(p + "self_attn.k_norm.weight", layer.k_norm);
    }
    vec(p + "post_attention_layernorm.weight", layer.ffn_norm);
    if (!layer.expert_gate.empty()) {
      const bool mixtral = s.model_type == "mixtral";
      const std::string moe = p + (mixtral ? "block_sparse_moe." : "mlp.");
      mat(moe + "gate.weight", layer.router);
      for (size_t e = 0; e < layer.expert_gate.size(); ++e) {
        const std::string expert = moe + "experts." + std::to_string(e) + ".";
        mat(expert + (mixtral ? "w1.weight" : "gate_proj.weight"), layer.expert_gate[e]);
        mat(expert + (mixtral ? "w3.weight" : "up_proj.weight"), layer.expert_up[e]);
        mat(expert + (mixtral ? "w2.weight" : "down_proj.weight"), layer.expert_down[e]);
      }
    } else if (s.model_type == "phi3") {  // rows: gate, then up
      tensors.push_back({p + "mlp.gate_up_proj.weight",
                         {2 * layer.w_gate.rows, layer.w_gate.cols},
                         &join({&layer.w_gate, &layer.w_up})});
    } else {
      mat(p + "mlp.gate_proj.weight", layer.w_gate);
      mat(p + "mlp.up_proj.weight", layer.w_up);
    }
    if (layer.expert_gate.empty()) mat(p + "mlp.down_proj.weight", layer.w_down);
  }
  vec("model.norm.weight", w.norm);
  if (!s.tied) mat("lm_head.weight", w.lm_head);

  if (s.n_shards <= 1) {
    write_bytes(dir + "/model.safetensors", safetensors_bytes(tensors, s.dtype, s.unaligned));
    return;
  }
  nlohmann::ordered_json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::ordered_json::object()}};
  const size_t per_shard = (tensors.size() + s.n_shards - 1) / s.n_shards;
  for (int shard = 0; shard < s.n_shards; ++shard) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard + 1, s.n_shards);
    const size_t begin = std::min(tensors.size(), shard * per_shard), end = std::min(tensors.size(), begin + per_shard);
    std::vector<NamedTensor> part(tensors.begin() + static_cast<std::ptrdiff_t>(begin),
                                  tensors.begin() + static_cast<std::ptrdiff_t>(end));
    for (const NamedTensor& t : part) index["weight_map"][t.name] = name;
    write_bytes(dir + "/" + name, safetensors_bytes(part, s.dtype, s.unaligned));
  }
  write_text(dir + "/model.safetensors.index.json", index.dump(2));
}

}  // namespace tandem::test_support
