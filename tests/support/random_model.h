// Test helper: small random-weight Llama (or Qwen3, Gemma 3, MoE, gpt-oss) models written as GGUF files (odd shapes,
// any computable weight type, tied or untied head), plus the float weights the file actually
// holds (after the round trip through the stored type) so a reference can use them without
// going through the loader under test.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/quant.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"

namespace tandem::test_support {

struct RandomModelSpec {
  int64_t d_model = 48;
  int64_t n_layers = 2;
  int64_t n_heads = 3;
  int64_t n_kv_heads = 3;
  int64_t d_ff = 37;
  int64_t vocab_size = 67;
  int64_t context_length = 64;
  int64_t rope_dims = 0;  // 0: the whole head
  bool tied_output = false;
  DType dtype = DType::F32;  // matrices and token_embd; norms stay f32
  float rms_norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  uint32_t seed = 1;
  // "qwen3": qwen3.* keys, per-head attn_q_norm/attn_k_norm, half-split RoPE pairs, and
  // attention.key_length/value_length = head_size when that is set.
  std::string architecture = "llama";
  int64_t head_size = 0;  // 0: d_model / n_heads
  // attention.sliding_window (0: none). "gemma3" adds per-head Q/K norms, post-attention and
  // post-FFN norms, and, with a window, every window_pattern-th layer global (0: all local),
  // the local layers turning at rope_freq_base_local.
  int64_t sliding_window = 0;
  int64_t window_pattern = 2;
  float rope_freq_base_local = 10000.0f;
  float final_logit_softcap = 0.0f;  // <arch>.final_logit_softcapping when > 0
  // "gemma2": gemma3's blocks without Q/K norms, even layers local (window_pattern unused, no
  // local RoPE base), gemma2.attn_logit_softcapping = attn_logit_softcap when > 0.
  float attn_logit_softcap = 0.0f;
  // <arch>.rope.scaling.type and .factor when the type is set, as llama.cpp's converter writes
  // Gemma 3's ("linear", 8).
  std::string rope_scaling_type;
  float rope_scaling_factor = 1.0f;
  // Mixture of experts ("qwen3moe", or "llama" as Mixtral) when n_experts > 0: <arch>.expert_count,
  // .expert_used_count (and for qwen3moe .expert_feed_forward_length = d_ff_expert; a llama's
  // experts are d_ff wide), an f32 router ffn_gate_inp and stacked ffn_{gate,up,down}_exps
  // instead of the dense FFN. expert_weights_norm false writes that key (default: absent, true).
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t d_ff_expert = 0;
  bool expert_weights_norm = true;
  // Each expert as a tensor of its own, blk.N.ffn_{gate,up,down}.E.weight [rows, cols], as old
  // Mixtral conversions store them, instead of the stacked ffn_*_exps (the same values either way).
  bool experts_as_own_tensors = false;
  float router_scale = 3.0f;  // router logits spread over a few units: clear top-k choices
  // "gpt-oss" (with n_experts > 0 and a sliding_window, even layers local): random biases on
  // Q/K/V/output, the router and every expert projection, random attn_sinks, the FFN norm named
  // post_attention_norm, gpt-oss.expert_feed_forward_length = d_ff_expert; YaRN keys when
  // yarn_factor > 0 (rope.scaling.type yarn, factor, original_context_length = yarn_original).
  double yarn_factor = 0.0;
  int64_t yarn_original = 0;
  float sink_scale = 1.5f;  // sinks uniform in +-this: the size of the attention scores

  int64_t head_dim() const { return head_size > 0 ? head_size : d_model / n_heads; }
  int64_t rotary_dims() const { return rope_dims > 0 ? rope_dims : head_dim(); }
  int64_t expert_width() const { return architecture == "llama" || d_ff_expert == 0 ? d_ff : d_ff_expert; }
};

// A weight matrix [rows, cols] as the model file holds it, dequantized to float.
struct RandomMatrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> values;  // [rows, cols]
  float at(int64_t r, int64_t c) const { return values[static_cast<size_t>(r * cols + c)]; }
};

struct RandomLayer {
  std::vector<float> attn_norm, ffn_norm;            // [d_model]
  std::vector<float> q_norm, k_norm;                 // [head_dim] (qwen3, gemma3; empty otherwise)
  std::vector<float> post_attn_norm, post_ffn_norm;  // [d_model] (gemma3; empty otherwise)
  RandomMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
  // Mixture of experts (empty otherwise): router [n_experts, d_model], then per expert.
  RandomMatrix router;
  std::vector<RandomMatrix> expert_gate, expert_up, expert_down;
  // gpt-oss (empty otherwise): biases, sinks [n_heads], router bias [n_experts], expert biases.
  std::vector<float> bq, bk, bv, bo, sinks, router_bias;
  std::vector<std::vector<float>> expert_gate_bias, expert_up_bias, expert_down_bias;  // [n_experts][width]
};

struct RandomWeights {
  RandomMatrix token_embedding;  // [vocab_size, d_model]
  std::vector<RandomLayer> layers;
  std::vector<float> output_norm;  // [d_model]
  RandomMatrix output;             // [vocab_size, d_model]; a copy of the embedding when tied
};

namespace detail {

// Uniform values scaled by 1/sqrt(cols) so every projection keeps activations near unit size.
inline RandomMatrix random_matrix(std::mt19937& rng, int64_t rows, int64_t cols, DType dtype, float scale,
                                  std::vector<uint8_t>& bytes) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  RandomMatrix m{rows, cols, std::vector<float>(static_cast<size_t>(rows * cols))};
  for (float& v : m.values) v = uniform(rng) * scale;
  const int64_t row_bytes = dtype_row_bytes(dtype, cols);
  bytes.assign(static_cast<size_t>(rows * row_bytes), 0);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(dtype, m.values.data() + r * cols, bytes.data() + r * row_bytes, cols);
    // The reference must see exactly what the file holds.
    dequantize_row(dtype, bytes.data() + r * row_bytes, m.values.data() + r * cols, cols);
  }
  return m;
}

inline std::vector<float> random_norm(std::mt19937& rng, int64_t n, std::vector<uint8_t>& bytes) {
  std::uniform_real_distribution<float> uniform(0.7f, 1.3f);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = uniform(rng);
  bytes.resize(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return values;
}

}  // namespace detail

// Writes the model to `path` (a .gguf file) and returns its weights as floats.
inline RandomWeights write_random_model(const RandomModelSpec& s, const std::string& path) {
  std::mt19937 rng(s.seed);
  GgufWriter writer;
  const std::string& a = s.architecture;
  writer.set("general.architecture", GgufValue::string(a));
  writer.set(a + ".embedding_length", GgufValue::u32(static_cast<uint32_t>(s.d_model)));
  writer.set(a + ".block_count", GgufValue::u32(static_cast<uint32_t>(s.n_layers)));
  writer.set(a + ".feed_forward_length", GgufValue::u32(static_cast<uint32_t>(s.d_ff)));
  writer.set(a + ".attention.head_count", GgufValue::u32(static_cast<uint32_t>(s.n_heads)));
  writer.set(a + ".attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(s.n_kv_heads)));
  if (s.head_size > 0) {
    writer.set(a + ".attention.key_length", GgufValue::u32(static_cast<uint32_t>(s.head_size)));
    writer.set(a + ".attention.value_length", GgufValue::u32(static_cast<uint32_t>(s.head_size)));
  }
  writer.set(a + ".context_length", GgufValue::u32(static_cast<uint32_t>(s.context_length)));
  writer.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_norm_eps));
  writer.set(a + ".rope.freq_base", GgufValue::f32(s.rope_freq_base));
  writer.set(a + ".rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(s.rotary_dims())));
  if (s.sliding_window > 0)
    writer.set(a + ".attention.sliding_window", GgufValue::u32(static_cast<uint32_t>(s.sliding_window)));
  if (a == "gemma3" && s.sliding_window > 0) {
    writer.set(a + ".attention.sliding_window_pattern", GgufValue::u32(static_cast<uint32_t>(s.window_pattern)));
    writer.set(a + ".rope.freq_base_swa", GgufValue::f32(s.rope_freq_base_local));
  }
  if (s.yarn_factor > 0.0) {
    writer.set(a + ".rope.scaling.type", GgufValue::string("yarn"));
    writer.set(a + ".rope.scaling.factor", GgufValue::f32(static_cast<float>(s.yarn_factor)));
    writer.set(a + ".rope.scaling.original_context_length", GgufValue::u32(static_cast<uint32_t>(s.yarn_original)));
  }
  if (s.final_logit_softcap > 0.0f) writer.set(a + ".final_logit_softcapping", GgufValue::f32(s.final_logit_softcap));
  if (s.attn_logit_softcap > 0.0f) writer.set(a + ".attn_logit_softcapping", GgufValue::f32(s.attn_logit_softcap));
  if (!s.rope_scaling_type.empty()) {
    writer.set(a + ".rope.scaling.type", GgufValue::string(s.rope_scaling_type));
    writer.set(a + ".rope.scaling.factor", GgufValue::f32(s.rope_scaling_factor));
  }
  if (s.n_experts > 0) {
    writer.set(a + ".expert_count", GgufValue::u32(static_cast<uint32_t>(s.n_experts)));
    writer.set(a + ".expert_used_count", GgufValue::u32(static_cast<uint32_t>(s.n_experts_used)));
    if (a != "llama")
      writer.set(a + ".expert_feed_forward_length", GgufValue::u32(static_cast<uint32_t>(s.expert_width())));
    if (!s.expert_weights_norm) writer.set(a + ".expert_weights_norm", GgufValue::boolean(false));
  }

  const int64_t d = s.d_model, q_width = s.n_heads * s.head_dim(), kv_width = s.n_kv_heads * s.head_dim();
  RandomWeights w;
  std::vector<uint8_t> bytes;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, float scale) {
    RandomMatrix m = detail::random_matrix(rng, rows, cols, s.dtype, scale, bytes);
    writer.add_tensor(name, s.dtype, {rows, cols}, std::move(bytes));
    return m;
  };
  auto norm = [&](const std::string& name, int64_t n) {
    std::vector<float> values = detail::random_norm(rng, n, bytes);
    writer.add_tensor(name, DType::F32, {n}, std::move(bytes));
    return values;
  };
  auto fan_in = [](int64_t n) { return 1.7f / std::sqrt(static_cast<float>(n)); };
  // n_experts matrices [rows, cols] of one kind (`p` blk.N., `kind` ffn_gate...) stacked as one
  // [n_experts, rows, cols] tensor <kind>_exps, or each its own <kind>.E when the spec says so.
  auto experts_of = [&](const std::string& p, const std::string& kind, int64_t rows, int64_t cols, float scale) {
    std::vector<RandomMatrix> experts;
    std::vector<uint8_t> all;
    for (int64_t e = 0; e < s.n_experts; ++e) {
      experts.push_back(detail::random_matrix(rng, rows, cols, s.dtype, scale, bytes));
      if (s.experts_as_own_tensors)
        writer.add_tensor(p + kind + "." + std::to_string(e) + ".weight", s.dtype, {rows, cols}, std::move(bytes));
      else
        all.insert(all.end(), bytes.begin(), bytes.end());
    }
    if (!s.experts_as_own_tensors)
      writer.add_tensor(p + kind + "_exps.weight", s.dtype, {s.n_experts, rows, cols}, std::move(all));
    return experts;
  };
  const bool qk_norm = a == "qwen3" || a == "qwen3moe" || a == "gemma3";
  const bool gpt_oss = a == "gpt-oss";
  // f32 values uniform in +-scale, `shape` the tensor's dims (a stack of rows for expert biases).
  auto f32_tensor = [&](const std::string& name, std::vector<int64_t> shape, float scale) {
    std::uniform_real_distribution<float> uniform(-scale, scale);
    int64_t n = 1;
    for (int64_t dim : shape) n *= dim;
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = uniform(rng);
    bytes.resize(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    writer.add_tensor(name, DType::F32, std::move(shape), std::move(bytes));
    return values;
  };
  auto per_expert = [&](const std::vector<float>& values, int64_t width) {
    std::vector<std::vector<float>> rows;
    for (int64_t e = 0; e < s.n_experts; ++e)
      rows.emplace_back(values.begin() + e * width, values.begin() + (e + 1) * width);
    return rows;
  };

  w.token_embedding = matrix("token_embd.weight", s.vocab_size, d, 1.0f);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    RandomLayer layer;
    layer.attn_norm = norm(p + "attn_norm.weight", d);
    layer.wq = matrix(p + "attn_q.weight", q_width, d, fan_in(d));
    layer.wk = matrix(p + "attn_k.weight", kv_width, d, fan_in(d));
    if (qk_norm) {
      layer.q_norm = norm(p + "attn_q_norm.weight", s.head_dim());
      layer.k_norm = norm(p + "attn_k_norm.weight", s.head_dim());
    }
    layer.wv = matrix(p + "attn_v.weight", kv_width, d, fan_in(d));
    layer.wo = matrix(p + "attn_output.weight", d, q_width, fan_in(q_width));
    if (a == "gemma2" || a == "gemma3") layer.post_attn_norm = norm(p + "post_attention_norm.weight", d);
    if (gpt_oss) {
      layer.bq = f32_tensor(p + "attn_q.bias", {q_width}, 0.3f);
      layer.bk = f32_tensor(p + "attn_k.bias", {kv_width}, 0.3f);
      layer.bv = f32_tensor(p + "attn_v.bias", {kv_width}, 0.3f);
      layer.bo = f32_tensor(p + "attn_output.bias", {d}, 0.3f);
      layer.sinks = f32_tensor(p + "attn_sinks.weight", {s.n_heads}, s.sink_scale);
    }
    layer.ffn_norm = norm(p + (gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), d);
    if (s.n_experts > 0) {
      // The router stays f32 in any file, as llama.cpp's converter and quantizer keep it.
      layer.router = detail::random_matrix(rng, s.n_experts, d, DType::F32, s.router_scale * fan_in(d), bytes);
      writer.add_tensor(p + "ffn_gate_inp.weight", DType::F32, {s.n_experts, d}, std::move(bytes));
      const int64_t width = s.expert_width();
      layer.expert_gate = experts_of(p, "ffn_gate", width, d, fan_in(d));
      layer.expert_up = experts_of(p, "ffn_up", width, d, fan_in(d));
      layer.expert_down = experts_of(p, "ffn_down", d, width, fan_in(width));
      if (gpt_oss) {
        layer.router_bias = f32_tensor(p + "ffn_gate_inp.bias", {s.n_experts}, 1.0f);
        layer.expert_gate_bias = per_expert(f32_tensor(p + "ffn_gate_exps.bias", {s.n_experts, width}, 0.5f), width);
        layer.expert_up_bias = per_expert(f32_tensor(p + "ffn_up_exps.bias", {s.n_experts, width}, 0.5f), width);
        layer.expert_down_bias = per_expert(f32_tensor(p + "ffn_down_exps.bias", {s.n_experts, d}, 0.3f), d);
      }
    } else {
      layer.w_gate = matrix(p + "ffn_gate.weight", s.d_ff, d, fan_in(d));
      layer.w_up = matrix(p + "ffn_up.weight", s.d_ff, d, fan_in(d));
      layer.w_down = matrix(p + "ffn_down.weight", d, s.d_ff, fan_in(s.d_ff));
    }
    if (a == "gemma2" || a == "gemma3") layer.post_ffn_norm = norm(p + "post_ffw_norm.weight", d);
    w.layers.push_back(std::move(layer));
  }
  w.output_norm = norm("output_norm.weight", d);
  w.output = s.tied_output ? w.token_embedding : matrix("output.weight", s.vocab_size, d, fan_in(d));
  writer.write(path);
  return w;
}

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::random_device device;
    path_ = std::filesystem::temp_directory_path() / ("tandem-test-" + std::to_string(device()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace tandem::test_support
