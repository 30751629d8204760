// Random GGUF writer (llama, qwen3, qwen3moe, gemma2, gemma3, phi3, gpt-oss; Mixtral as a llama with experts): metadata
// as llama.cpp names it, weights N(0, 0.02) from a self-contained PRNG (splitmix64 + Box-Muller) seeded per (seed,
// tensor name, row), so the bytes do not depend on thread count or the standard library's distributions. Tensors are
// streamed to the file one at a time; rows are generated in parallel.
#include "model/model_generator.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "base/error.h"
#include "base/quant.h"
#include "base/thread_pool.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "model/llama_file_type.h"
#include "model/rope_scaling.h"

namespace tandem {
namespace {

// Qwen3-0.6B's config.json: hidden 1024, 28 layers, 16 heads of 128 (not 1024 / 16), 8 KV
// heads, intermediate 3072, 40960 positions, rope_theta 1e6, rms_norm_eps 1e-6, tied head.
GeneratedShape qwen3_shape(std::string name, int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                           int64_t head_dim, int64_t d_ff, int64_t context_length) {
  GeneratedShape shape{std::move(name), d_model, n_layers, n_heads, n_kv_heads, d_ff, context_length};
  shape.architecture = "qwen3";
  shape.head_dim = head_dim;
  shape.rope_freq_base = 1000000.0f;
  shape.rms_norm_eps = 1e-6f;
  shape.tied_output = true;
  return shape;
}

// Gemma 3 1B's config.json: hidden 1152, 26 layers, 4 heads of 256, 1 KV head, intermediate
// 6912, 32768 positions, rope_theta 1e6 (local layers 10000), sliding_window 512 with every 6th
// layer global, rms_norm_eps 1e-6, query_pre_attn_scalar 256 (= head_dim), tied head.
GeneratedShape gemma3_shape(std::string name, int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                            int64_t head_dim, int64_t d_ff, int64_t context_length, int64_t window, int64_t pattern) {
  GeneratedShape shape{std::move(name), d_model, n_layers, n_heads, n_kv_heads, d_ff, context_length};
  shape.architecture = "gemma3";
  shape.head_dim = head_dim;
  shape.rope_freq_base = 1000000.0f;
  shape.rms_norm_eps = 1e-6f;
  shape.tied_output = true;
  shape.sliding_window = window;
  shape.sliding_window_pattern = pattern;
  return shape;
}

// Gemma 2 2B's config.json: hidden 2304, 26 layers, 8 heads of 256, 4 KV heads, intermediate
// 9216, 8192 positions, rope_theta 1e4 in every layer, sliding_window 4096 in the even layers
// (the odd ones global), rms_norm_eps 1e-6, query_pre_attn_scalar 256 (= head_dim),
// attn_logit_softcapping 50, final_logit_softcapping 30, tied head.
GeneratedShape gemma2_shape(std::string name, int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                            int64_t head_dim, int64_t d_ff, int64_t context_length, int64_t window) {
  GeneratedShape shape{std::move(name), d_model, n_layers, n_heads, n_kv_heads, d_ff, context_length};
  shape.architecture = "gemma2";
  shape.head_dim = head_dim;
  shape.rms_norm_eps = 1e-6f;
  shape.tied_output = true;
  shape.sliding_window = window;
  return shape;
}

// A Mistral-style llama whose window (32) a few hundred positions pass many times over.
GeneratedShape sliding_shape() {
  GeneratedShape shape{"test-sliding", 64, 2, 4, 2, 96, 1024};
  shape.sliding_window = 32;
  return shape;
}

// Phi-3-mini-4k's config.json: hidden 3072, 32 layers of 32 heads (MHA), intermediate 8192, 4096
// positions; Phi-4-mini's: 24 heads, 8 KV heads, RoPE on 0.75 of each 128-wide head, 131072
// positions by LongRoPE from 4096, tied head. Both rope_theta 1e4, rms_norm_eps 1e-5.
GeneratedShape phi3_shape(std::string name, int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                          int64_t d_ff, int64_t context_length, int64_t rope_dims, int64_t longrope_original,
                          bool tied) {
  GeneratedShape shape{std::move(name), d_model, n_layers, n_heads, n_kv_heads, d_ff, context_length};
  shape.architecture = "phi3";
  shape.rope_dims = rope_dims;
  shape.longrope_original_context = longrope_original;
  shape.tied_output = tied;
  return shape;
}

// Mixture of experts at Qwen3-0.6B's attention dims (d_model 1024, 28 layers, 16 heads of 128,
// 8 KV heads, tied head): 8 experts of width 1024, 2 per token, 1.04B parameters with Qwen's
// vocabulary (0.35B active), the shape of Qwen3-30B-A3B scaled down.
GeneratedShape qwen3moe_shape(std::string name, int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                              int64_t head_dim, int64_t d_ff, int64_t context_length, int64_t n_experts, int64_t n_used,
                              int64_t expert_width) {
  GeneratedShape shape =
      qwen3_shape(std::move(name), d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff, context_length);
  shape.architecture = "qwen3moe";
  shape.n_experts = n_experts;
  shape.n_experts_used = n_used;
  shape.d_ff_expert = expert_width;
  return shape;
}

// Mixtral 8x7B's layout (llama with 8 experts of d_ff, 2 per token, rope_theta 1e6, untied head)
// at d_model 1024: 16 layers of 16 heads (64 wide), 4 KV heads, experts 2304 wide; 1.01B
// parameters with Llama 2's 32000-token vocabulary (0.28B active).
GeneratedShape mixtral_shape(std::string name, int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                             int64_t d_ff, int64_t context_length, int64_t n_experts, int64_t n_used) {
  GeneratedShape shape{std::move(name), d_model, n_layers, n_heads, n_kv_heads, d_ff, context_length};
  shape.rope_freq_base = 1000000.0f;
  shape.n_experts = n_experts;
  shape.n_experts_used = n_used;
  return shape;
}

// gpt-oss-20b's config.json: hidden 2880, 24 layers, 64 heads of 64 (not 2880 / 64), 8 KV heads,
// 32 experts of width 2880 (intermediate_size), 4 per token, sliding_window 128 in the even
// layers, rope_theta 150000 with YaRN factor 32 from 4096 to 131072 positions, rms_norm_eps 1e-5,
// untied head. (Its vocabulary, o200k_harmony of 201088 tokens, is not in ../shared: gen-model
// takes whichever it is given.)
GeneratedShape gpt_oss_shape(std::string name, int64_t d_model, int64_t n_layers, int64_t n_heads, int64_t n_kv_heads,
                             int64_t head_dim, int64_t expert_width, int64_t context_length, int64_t n_experts,
                             int64_t n_used, int64_t window, double yarn_factor, int64_t yarn_original) {
  GeneratedShape shape{std::move(name), d_model, n_layers, n_heads, n_kv_heads, expert_width, context_length};
  shape.architecture = "gpt-oss";
  shape.head_dim = head_dim;
  shape.rope_freq_base = 150000.0f;
  shape.n_experts = n_experts;
  shape.n_experts_used = n_used;
  shape.d_ff_expert = expert_width;
  shape.sliding_window = window;
  shape.yarn_factor = yarn_factor;
  shape.yarn_original_context = yarn_original;
  return shape;
}

const std::array kShapes = {
    GeneratedShape{"llama-160m", 768, 12, 12, 12, 2048, 2048},
    GeneratedShape{"tinyllama-1.1b", 2048, 22, 32, 4, 5632, 2048},
    GeneratedShape{"test-tiny", 64, 2, 4, 2, 96, 256},
    GeneratedShape{"test-kquant", 256, 2, 4, 2, 512, 256},  // rows of whole k-quant blocks
    qwen3_shape("qwen3-0.6b", 1024, 28, 16, 8, 128, 3072, 40960),
    // Qwen3-1.7B's config.json: hidden 2048, 28 layers, 16 heads of 128, 8 KV heads, 6144 wide.
    qwen3_shape("qwen3-1.7b", 2048, 28, 16, 8, 128, 6144, 40960),
    // Heads of 32 while d_model / n_heads is 16: every place that assumed the quotient shows.
    qwen3_shape("test-qwen3", 64, 2, 4, 2, 32, 96, 256),
    sliding_shape(),
    gemma3_shape("gemma3-1b", 1152, 26, 4, 1, 256, 6912, 32768, 512, 6),
    // Window 64 with every 2nd layer global: 256 positions pass the window four times.
    gemma3_shape("test-gemma3", 64, 4, 4, 2, 32, 96, 1024, 64, 2),
    // Every layer local (pattern 0) with a window of 16: a Mistral-style window that llama.cpp
    // also applies (it ignores a llama file's), so the engine's dropped KV blocks meet the peer.
    gemma3_shape("test-gemma3-local", 64, 2, 4, 2, 32, 96, 1024, 16, 0),
    gemma2_shape("gemma2-2b", 2304, 26, 8, 4, 256, 9216, 8192, 4096),
    // Window 32 in layers 0 and 2: 256 positions pass it eight times.
    gemma2_shape("test-gemma2", 64, 4, 4, 2, 32, 96, 1024, 32),
    phi3_shape("phi3-mini", 3072, 32, 32, 32, 8192, 4096, 0, 0, false),
    phi3_shape("phi-4-mini", 3072, 32, 24, 8, 8192, 131072, 96, 4096, true),
    // Phi-4-mini in small: partial RoPE (12 of 16), GQA, LongRoPE from 256 to 1024 positions (so
    // a run of a few hundred tokens, llama.cpp's too, takes the long factors).
    phi3_shape("test-phi3", 64, 2, 4, 2, 96, 1024, 12, 256, true),
    qwen3moe_shape("qwen3moe-1b", 1024, 28, 16, 8, 128, 3072, 40960, 8, 2, 1024),
    mixtral_shape("mixtral-1b", 1024, 16, 16, 4, 2304, 32768, 8, 2),
    // 4 experts, 2 per token, rows of whole 32-blocks (experts 64 wide; test-mixtral's 96).
    qwen3moe_shape("test-qwen3moe", 64, 2, 4, 2, 32, 96, 1024, 4, 2, 64),
    mixtral_shape("test-mixtral", 64, 2, 4, 2, 96, 1024, 4, 2),
    gpt_oss_shape("gpt-oss-20b", 2880, 24, 64, 8, 64, 2880, 131072, 32, 4, 128, 32.0, 4096),
    // Heads of 32 while d_model / n_heads is 16; 4 experts of 64 (whole MXFP4 blocks), 2 per
    // token; window 32 in layers 0 and 2, so 256 positions pass it eight times; YaRN 4x from 256.
    gpt_oss_shape("test-gpt-oss", 64, 4, 4, 2, 32, 64, 1024, 4, 2, 32, 4.0, 256),
};

// What gen-model writes for RoPE scaling: the keys' values, and Llama 3's divisors.
struct RopePlan {
  RopeScaling scaling;
  std::vector<float> llama3_factors;  // rope_freqs.weight; empty: none
};

RopePlan plan_rope(const GeneratedShape& shape, const GeneratorOptions& options) {
  RopePlan plan;
  std::string type = options.rope_scaling;
  if (type.empty()) type = shape.longrope_original_context > 0 ? "longrope" : shape.yarn_factor > 0.0 ? "yarn" : "none";
  const bool shape_yarn = options.rope_scaling.empty() && shape.yarn_factor > 0.0;
  TANDEM_CHECK_INPUT(std::isfinite(options.rope_factor) && options.rope_factor >= 0.0 && options.rope_factor < 1e6,
                     "--rope-factor {} is out of range", options.rope_factor);
  TANDEM_CHECK_INPUT(options.rope_original_context >= 0 && options.rope_original_context <= shape.context_length,
                     "--rope-original-context {} is outside 1..{} (the context)", options.rope_original_context,
                     shape.context_length);
  const int64_t rope_dims = shape.rotary_dims(), pairs = rope_dims / 2;
  const double factor = options.rope_factor > 0.0 ? options.rope_factor : shape_yarn ? shape.yarn_factor : 4.0;
  int64_t original = options.rope_original_context;
  if (original == 0 && shape_yarn) original = shape.yarn_original_context;
  if (original == 0)
    original = type == "longrope" && shape.longrope_original_context > 0
                   ? shape.longrope_original_context
                   : std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(shape.context_length) / factor));
  if (type == "llama3") {
    plan.llama3_factors =
        llama3_freq_factors(rope_dims, shape.rope_freq_base, factor, 1.0, 4.0, static_cast<double>(original));
    return plan;
  }
  RopeScaling& s = plan.scaling;
  s.type = parse_rope_scaling_type(type);
  s.original_context = original;
  if (s.type == RopeScalingType::Linear || s.type == RopeScalingType::Yarn) s.factor = factor;
  if (s.type == RopeScalingType::LongRope) {
    TANDEM_CHECK_INPUT(options.rope_factor == 0.0,
                       "--rope-factor does not apply to longrope (its factor is the context over the original)");
    s.factor = static_cast<double>(shape.context_length) / static_cast<double>(original);
    s.attn_factor = longrope_magnitude(s.factor, original);
    for (int64_t i = 0; i < pairs; ++i) {
      const double x = pairs > 1 ? static_cast<double>(i) / static_cast<double>(pairs - 1) : 0.0;
      s.long_factors.push_back(static_cast<float>(1.0 + (std::max(1.0, s.factor) - 1.0) * x * x));
      s.short_factors.push_back(static_cast<float>(1.0 + 0.1 * x));
    }
  }
  s.validate(rope_dims);
  return plan;
}

constexpr float kWeightStddev = 0.02f;
// gpt-oss's biases, and its sink logits (of the size of the attention scores, so they matter).
constexpr float kBiasStddev = 0.2f;
constexpr float kSinkStddev = 1.0f;

uint64_t mix64(uint64_t z) {  // the splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ull); }

 private:
  uint64_t state_;
};

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

// Fills `row` with N(0, stddev) samples by Box-Muller: one 64-bit draw gives two 24-bit
// uniforms and so two samples. Float math: ~2x faster than double, and 24 bits already
// reach 5.7 standard deviations, plenty for random weights.
void fill_normal(SplitMix64& rng, float stddev, std::vector<float>& row) {
  constexpr float kTwoPi = 6.28318530717958647f;
  for (size_t i = 0; i < row.size(); i += 2) {
    const uint64_t bits = rng.next();
    const float u1 = static_cast<float>((bits >> 40) + 1) * 0x1.0p-24f;        // (0, 1]: log finite
    const float u2 = static_cast<float>((bits >> 8) & 0xffffff) * 0x1.0p-24f;  // [0, 1)
    const float radius = std::sqrt(-2.0f * std::log(u1)) * stddev;
    row[i] = radius * std::cos(kTwoPi * u2);
    if (i + 1 < row.size()) row[i + 1] = radius * std::sin(kTwoPi * u2);
  }
}

uint32_t file_type_code(DType type, bool q4_k_m, bool q5_k_m, bool q3_k_m) {
  if (q3_k_m) return kLlamaFileTypeQ3KM;
  if (q5_k_m) return kLlamaFileTypeQ5KM;
  if (const std::optional<uint32_t> code = llama_file_type(type, q4_k_m)) return *code;
  throw InputError(fmt::format(
      "gen-model cannot write type {} (use F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, "
      "Q5_K, Q6_K, IQ4_XS, Q4_K_M, Q5_K_M or Q3_K_M)",
      dtype_name(type)));
}

// llama.cpp's Q4_K_M gives attn_v and ffn_down more bits in the first and last eighth of the
// layers and in every third layer between.
bool favoured_layer(int64_t layer, int64_t n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

// A matrix whose rows are not whole blocks of `type` falls back to Q8_0 (32-element blocks),
// or F16 when even that does not fit.
DType fitting_type(DType type, int64_t row_length) {
  if (row_length % dtype_traits(type).block_size == 0) return type;
  return row_length % 32 == 0 ? DType::Q8_0 : DType::F16;
}

struct PlannedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // outermost first
  bool constant;               // norm weight: every element `value`, rather than random
  float value = 1.0f;
  float stddev = kWeightStddev;  // random tensors: N(0, stddev)
  std::vector<float> values{};   // F32 tensors of given values (RoPE factors), when not empty
};

// k_m: llama.cpp's Q4_K_M / Q5_K_M recipe on `type` (Q4_K or Q5_K).
std::vector<PlannedTensor> plan_tensors(const GeneratedShape& shape, DType type, bool k_m, bool q3_k_m,
                                        int64_t vocab_size, float branch_scale, float output_scale,
                                        const RopePlan& rope) {
  if (q3_k_m) type = DType::Q3_K;
  // gpt-oss in MXFP4 is llama.cpp's MXFP4_MOE: experts MXFP4, every other matrix Q8_0.
  const bool gpt_oss = shape.gpt_oss();
  const DType expert_type = type;
  if (gpt_oss && type == DType::MXFP4) type = DType::Q8_0;
  const int64_t head_dim = shape.head_size();
  const int64_t q_width = shape.n_heads * head_dim;
  const int64_t kv_width = shape.n_kv_heads * head_dim;
  std::vector<PlannedTensor> plan = {
      {"token_embd.weight", type, {vocab_size, shape.d_model}, false},
      {"output_norm.weight", DType::F32, {shape.d_model}, true, output_scale},
  };
  if (!shape.tied_output)
    plan.push_back({"output.weight", k_m || q3_k_m ? DType::Q6_K : type, {vocab_size, shape.d_model}, false});
  auto fixed = [&](const char* name, const std::vector<float>& values) {
    if (!values.empty())
      plan.push_back({name, DType::F32, {static_cast<int64_t>(values.size())}, true, 1.0f, kWeightStddev, values});
  };
  fixed("rope_freqs.weight", rope.llama3_factors);
  fixed("rope_factors_long.weight", rope.scaling.long_factors);
  fixed("rope_factors_short.weight", rope.scaling.short_factors);
  const bool qk_norm =
      shape.architecture == "qwen3" || shape.architecture == "qwen3moe" || shape.architecture == "gemma3";
  const bool gemma = shape.architecture == "gemma2" || shape.architecture == "gemma3";
  // Phi-3 fuses Q, K, V into attn_qkv and gate, up into ffn_up (gate rows first).
  const bool phi3 = shape.architecture == "phi3";

  for (int64_t layer = 0; layer < shape.n_layers; ++layer) {
    const std::string prefix = fmt::format("blk.{}.", layer);
    auto add = [&](const char* name, DType dtype, std::vector<int64_t> dims, bool constant, float scale = 1.0f) {
      plan.push_back({prefix + name, dtype, std::move(dims), constant, 1.0f, kWeightStddev * scale});
    };
    add("attn_norm.weight", DType::F32, {shape.d_model}, true);
    // gpt-oss: random biases and sinks, so that each is exercised; sinks of the scores' size.
    auto add_random = [&](const char* name, std::vector<int64_t> dims, float stddev) {
      plan.push_back({prefix + name, DType::F32, std::move(dims), false, 1.0f, stddev});
    };
    if (phi3) {  // llama.cpp's Q4_K_M / Q5_K_M / Q3_K_M give attn_qkv Q5_K / Q6_K / Q4_K
      add("attn_qkv.weight",
          k_m      ? (type == DType::Q5_K ? DType::Q6_K : DType::Q5_K)
          : q3_k_m ? DType::Q4_K
                   : type,
          {q_width + 2 * kv_width, shape.d_model}, false);
    } else {
      add("attn_q.weight", type, {q_width, shape.d_model}, false);
      add("attn_k.weight", type, {kv_width, shape.d_model}, false);
    }
    if (qk_norm) {  // all ones, like the other norms
      add("attn_q_norm.weight", DType::F32, {head_dim}, true);
      add("attn_k_norm.weight", DType::F32, {head_dim}, true);
    }
    DType attn_v = k_m && favoured_layer(layer, shape.n_layers) ? DType::Q6_K : type;
    DType ffn_down = attn_v;
    DType attn_output = type;
    if (q3_k_m) {
      attn_v = layer < 2 ? DType::Q5_K : DType::Q4_K;
      ffn_down = layer < shape.n_layers / 16 ? DType::Q5_K : DType::Q4_K;
      attn_output = DType::Q4_K;
    }
    if (!phi3) add("attn_v.weight", attn_v, {kv_width, shape.d_model}, false);
    add("attn_output.weight", attn_output, {shape.d_model, q_width}, false, branch_scale);
    if (gemma) add("post_attention_norm.weight", DType::F32, {shape.d_model}, true);
    if (gpt_oss) {  // the names llama.cpp's converter gives gpt-oss's biases, sinks and FFN norm
      add_random("attn_q.bias", {q_width}, kBiasStddev);
      add_random("attn_k.bias", {kv_width}, kBiasStddev);
      add_random("attn_v.bias", {kv_width}, kBiasStddev);
      add_random("attn_output.bias", {shape.d_model}, kBiasStddev * branch_scale);
      add_random("attn_sinks.weight", {shape.n_heads}, kSinkStddev);
    }
    add(gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight", DType::F32, {shape.d_model}, true);
    if (shape.n_experts > 0) {
      // The router stays f32, as llama.cpp's converter writes it and its quantizer keeps it.
      const int64_t n = shape.n_experts, width = shape.expert_width();
      add("ffn_gate_inp.weight", DType::F32, {n, shape.d_model}, false);
      add("ffn_gate_exps.weight", expert_type, {n, width, shape.d_model}, false);
      add("ffn_up_exps.weight", expert_type, {n, width, shape.d_model}, false);
      add("ffn_down_exps.weight", gpt_oss ? expert_type : ffn_down, {n, shape.d_model, width}, false, branch_scale);
      if (gpt_oss) {
        add_random("ffn_gate_inp.bias", {n}, kBiasStddev);
        add_random("ffn_gate_exps.bias", {n, width}, kBiasStddev);
        add_random("ffn_up_exps.bias", {n, width}, kBiasStddev);
        add_random("ffn_down_exps.bias", {n, shape.d_model}, kBiasStddev * branch_scale);
      }
    } else if (phi3) {
      add("ffn_up.weight", type, {2 * shape.d_ff, shape.d_model}, false);
    } else {
      add("ffn_gate.weight", type, {shape.d_ff, shape.d_model}, false);
      add("ffn_up.weight", type, {shape.d_ff, shape.d_model}, false);
    }
    if (shape.n_experts == 0) add("ffn_down.weight", ffn_down, {shape.d_model, shape.d_ff}, false, branch_scale);
    if (gemma) add("post_ffw_norm.weight", DType::F32, {shape.d_model}, true);
  }
  for (PlannedTensor& tensor : plan) tensor.dtype = fitting_type(tensor.dtype, tensor.shape.back());
  return plan;
}

// A SentencePiece vocabulary without Phi-3's tokens gets them as llama.cpp's phi3 converter
// writes them: ids 32000.. <|endoftext|>, <|assistant|>, ... (control, score -1000), then
// [PAD<id>] up to 32064 (unused, score -10000). Returns the replaced tokenizer.ggml.* arrays;
// none for any other vocabulary (a byte-level one, or one that has them).
std::vector<std::pair<std::string, GgufValue>> phi3_vocabulary(const GgufFile& vocab) {
  constexpr int64_t kPhi3VocabSize = 32064;
  constexpr int32_t kControl = 3, kUnused = 5;
  const std::array<const char*, 11> added = {
      "<|endoftext|>", "<|assistant|>", "<|placeholder1|>", "<|placeholder2|>", "<|placeholder3|>", "<|placeholder4|>",
      "<|system|>",    "<|end|>",       "<|placeholder5|>", "<|placeholder6|>", "<|user|>"};
  std::optional<std::vector<std::string>> tokens = vocab.get_string_array("tokenizer.ggml.tokens");
  std::optional<std::vector<float>> scores = vocab.get_float_array("tokenizer.ggml.scores");
  std::optional<std::vector<int64_t>> types = vocab.get_int_array("tokenizer.ggml.token_type");
  if (vocab.get_string("tokenizer.ggml.model") != "llama" || !tokens || !scores || !types ||
      static_cast<int64_t>(tokens->size()) + static_cast<int64_t>(added.size()) > kPhi3VocabSize ||
      std::find(tokens->begin(), tokens->end(), added[0]) != tokens->end())
    return {};
  GgufArray token_values, score_values, type_values;
  for (size_t i = 0; i < tokens->size(); ++i) {
    token_values.push_back(GgufValue::string((*tokens)[i]));
    score_values.push_back(GgufValue::f32((*scores)[i]));
    type_values.push_back(GgufValue::i32(static_cast<int32_t>((*types)[i])));
  }
  for (int64_t id = static_cast<int64_t>(tokens->size()); id < kPhi3VocabSize; ++id) {
    const auto k = static_cast<size_t>(id - static_cast<int64_t>(tokens->size()));
    const bool chat = k < added.size();
    token_values.push_back(GgufValue::string(chat ? std::string(added[k]) : fmt::format("[PAD{}]", id)));
    score_values.push_back(GgufValue::f32(chat ? -1000.0f : -10000.0f));
    type_values.push_back(GgufValue::i32(chat ? kControl : kUnused));
  }
  return {{"tokenizer.ggml.tokens", GgufValue::array(GgufValueType::String, std::move(token_values))},
          {"tokenizer.ggml.scores", GgufValue::array(GgufValueType::Float32, std::move(score_values))},
          {"tokenizer.ggml.token_type", GgufValue::array(GgufValueType::Int32, std::move(type_values))}};
}

}  // namespace

std::optional<GeneratedShape> find_generated_shape(const std::string& name) {
  for (const GeneratedShape& shape : kShapes)
    if (shape.name == name) return shape;
  return std::nullopt;
}

std::vector<std::string> generated_shape_names() {
  std::vector<std::string> names;
  for (const GeneratedShape& shape : kShapes) names.push_back(shape.name);
  return names;
}

void generate_random_gguf(const GeneratorOptions& options) {
  auto shape = find_generated_shape(options.shape);
  if (!shape) {
    std::string known;
    for (const std::string& name : generated_shape_names()) known += (known.empty() ? "" : ", ") + name;
    throw InputError(fmt::format("unknown model shape '{}' (known: {})", options.shape, known));
  }
  const uint32_t file_type = file_type_code(options.type, options.q4_k_m, options.q5_k_m, options.q3_k_m);
  TANDEM_CHECK_INPUT(options.n_layers >= 0 && options.n_layers <= shape->n_layers,
                     "--layers {} is outside 1..{} (the {} shape's layers)", options.n_layers, shape->n_layers,
                     shape->name);
  TANDEM_CHECK_INPUT(std::isfinite(options.branch_scale) && options.branch_scale > 0.0f,
                     "--branch-scale must be a positive number");
  if (options.n_layers > 0) shape->n_layers = options.n_layers;
  TANDEM_CHECK_INPUT(options.context_length >= 0 && options.context_length <= (int64_t{1} << 20),
                     "--context {} is outside 0..1048576", options.context_length);
  if (options.context_length > 0) shape->context_length = options.context_length;
  TANDEM_CHECK_INPUT(std::isfinite(options.output_scale) && options.output_scale > 0.0f,
                     "--output-scale must be a positive number, not {}", options.output_scale);

  const GgufFile vocab = GgufFile::open(options.vocab_path);
  const auto tokens = vocab.get_string_array("tokenizer.ggml.tokens");
  TANDEM_CHECK_INPUT(tokens.has_value() && !tokens->empty(),
                     "{}: no tokenizer.ggml.tokens array, so it cannot serve as a vocabulary", options.vocab_path);
  // Phi-3's vocabulary is Llama 2's SentencePiece one plus its chat tokens, padded to 32064;
  // llama.cpp marks <|endoftext|> of any model named phi3 and fails without it.
  const std::vector<std::pair<std::string, GgufValue>> phi3_tokens =
      shape->architecture == "phi3" ? phi3_vocabulary(vocab) : std::vector<std::pair<std::string, GgufValue>>{};
  int64_t vocab_size = static_cast<int64_t>(tokens->size());
  for (const auto& [key, value] : phi3_tokens)
    if (key == "tokenizer.ggml.tokens") vocab_size = static_cast<int64_t>(value.as_array()->size());

  GgufWriter writer;
  const int64_t head_dim = shape->head_size();
  const std::string& arch = shape->architecture;
  auto u32 = [](int64_t v) { return GgufValue::u32(static_cast<uint32_t>(v)); };
  writer.set("general.architecture", GgufValue::string(arch));
  const std::string scale_note =
      options.output_scale == 1.0f ? "" : fmt::format(", output scale {}", options.output_scale);
  writer.set("general.name",
             GgufValue::string(fmt::format("{} (random weights, seed {}{})", shape->name, options.seed, scale_note)));
  writer.set("general.file_type", GgufValue::u32(file_type));
  if (options.q4_k_m || options.q5_k_m || options.q3_k_m ||
      (options.type != DType::F32 && options.type != DType::F16 && options.type != DType::BF16))
    writer.set("general.quantization_version", GgufValue::u32(2));
  writer.set(arch + ".context_length", u32(shape->context_length));
  writer.set(arch + ".embedding_length", u32(shape->d_model));
  writer.set(arch + ".block_count", u32(shape->n_layers));
  writer.set(arch + ".feed_forward_length", u32(shape->d_ff));
  writer.set(arch + ".attention.head_count", u32(shape->n_heads));
  writer.set(arch + ".attention.head_count_kv", u32(shape->n_kv_heads));
  if (shape->head_dim > 0) {  // a head size of its own (Qwen3)
    writer.set(arch + ".attention.key_length", u32(head_dim));
    writer.set(arch + ".attention.value_length", u32(head_dim));
  }
  writer.set(arch + ".attention.layer_norm_rms_epsilon", GgufValue::f32(shape->rms_norm_eps));
  writer.set(arch + ".rope.freq_base", GgufValue::f32(shape->rope_freq_base));
  writer.set(arch + ".rope.dimension_count", u32(shape->rotary_dims()));
  const RopePlan rope = plan_rope(*shape, options);
  write_gguf_rope_scaling(writer, arch + ".", rope.scaling);
  writer.set(arch + ".vocab_size", u32(vocab_size));
  if (shape->sliding_window > 0) writer.set(arch + ".attention.sliding_window", u32(shape->sliding_window));
  if (shape->n_experts > 0) {  // as llama.cpp's converter writes Mixtral's and Qwen3-MoE's
    writer.set(arch + ".expert_count", u32(shape->n_experts));
    writer.set(arch + ".expert_used_count", u32(shape->n_experts_used));
    if (arch == "qwen3moe" || arch == "gpt-oss")
      writer.set(arch + ".expert_feed_forward_length", u32(shape->expert_width()));
  }
  if (arch == "gemma3" && shape->sliding_window > 0) {
    writer.set(arch + ".attention.sliding_window_pattern", u32(shape->sliding_window_pattern));
    writer.set(arch + ".rope.freq_base_swa", GgufValue::f32(10000.0f));
  }
  if (arch == "gemma2") {  // Gemma 2's caps, as llama.cpp's converter writes them
    writer.set(arch + ".attn_logit_softcapping", GgufValue::f32(50.0f));
    writer.set(arch + ".final_logit_softcapping", GgufValue::f32(30.0f));
  }
  for (const auto& [key, value] : vocab.metadata())
    if (key.starts_with("tokenizer.ggml.")) writer.set(key, value);
  for (const auto& [key, value] : phi3_tokens) writer.set(key, value);

  const DType base_type = options.q5_k_m ? DType::Q5_K : options.q4_k_m ? DType::Q4_K : options.type;
  std::vector<PlannedTensor> plan = plan_tensors(*shape, base_type, options.q4_k_m || options.q5_k_m, options.q3_k_m,
                                                 vocab_size, options.branch_scale, options.output_scale, rope);
  if (options.rank_head > 0) {
    plan.push_back({"cls.output.weight", DType::F32, {options.rank_head, shape->d_model}, false});
    plan.push_back({"cls.output.bias", DType::F32, {options.rank_head}, false});
  }
  int64_t bytes_total = 0;
  for (const PlannedTensor& tensor : plan) bytes_total += GgufWriter::tensor_bytes(tensor.dtype, tensor.shape);

  ThreadPool pool;
  int64_t tensors_done = 0, bytes_done = 0;
  for (const PlannedTensor& tensor : plan) {
    writer.add_tensor(tensor.name, tensor.dtype, tensor.shape, [&](std::span<uint8_t> out) {
      const int64_t row_length = tensor.shape.back();
      const int64_t row_bytes = dtype_row_bytes(tensor.dtype, row_length);
      const auto n_rows = static_cast<int64_t>(out.size()) / row_bytes;
      const uint64_t tensor_seed = mix64(options.seed ^ mix64(fnv1a(tensor.name)));
      pool.parallel_for(
          n_rows,
          [&](int64_t begin, int64_t end, int) {
            std::vector<float> row(static_cast<size_t>(row_length), tensor.value);
            if (!tensor.values.empty()) row = tensor.values;
            for (int64_t r = begin; r < end; ++r) {
              if (!tensor.constant) {
                SplitMix64 rng(mix64(tensor_seed + static_cast<uint64_t>(r)));
                fill_normal(rng, tensor.stddev, row);
              }
              quantize_row(tensor.dtype, row.data(), out.data() + r * row_bytes, row_length);
            }
          },
          16);
      bytes_done += static_cast<int64_t>(out.size());
      if (options.progress)
        options.progress(++tensors_done, static_cast<int64_t>(plan.size()), bytes_done, bytes_total);
    });
  }
  writer.write(options.out_path);
}

}  // namespace tandem
