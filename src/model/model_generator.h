// Random-weight GGUF files of known shapes (llama: llama-160m, tinyllama-1.1b, test-tiny,
// test-kquant, test-sliding; qwen3: qwen3-0.6b, qwen3-1.7b, test-qwen3; mixture of experts: qwen3moe-1b,
// test-qwen3moe (qwen3moe), mixtral-1b, test-mixtral (llama with experts); gemma2: gemma2-2b,
// test-gemma2; gemma3: gemma3-1b, test-gemma3, test-gemma3-local; phi3: phi3-mini, phi-4-mini, test-phi3;
// gpt-oss: gpt-oss-20b, test-gpt-oss), for
// benchmarks and tests without downloading a model, with any RoPE scaling on request. The tokenizer is copied from a
// vocabulary GGUF (for phi3 shapes a SentencePiece one gets Phi-3's chat tokens, as Phi-3's own
// has). Output is a pure function of (shape, type, vocabulary, seed, options).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/dtype.h"

namespace tandem {

struct GeneratedShape {
  std::string name;
  int64_t d_model = 0;
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t d_ff = 0;
  int64_t context_length = 0;
  std::string architecture = "llama";  // "qwen3" (per-head Q/K norms, half-split RoPE), "phi3" (fused
                                       // attn_qkv and gate+up in ffn_up, half-split RoPE)
  int64_t head_dim = 0;                // 0: d_model / n_heads
  int64_t rope_dims = 0;               // 0: the whole head (Phi-4-mini: 0.75 of it)
  float rope_freq_base = 10000.0f;
  float rms_norm_eps = 1e-5f;
  bool tied_output = false;    // no output.weight: the head reads token_embd
  int64_t sliding_window = 0;  // attention.sliding_window (0: none)
  // gemma3: attention.sliding_window_pattern, every this-many-th layer global (0: all local).
  int64_t sliding_window_pattern = 6;
  // LongRoPE with this original context (Phi-4-mini: 4096 of 131072); 0: no scaling.
  int64_t longrope_original_context = 0;
  // Mixture of experts (architecture qwen3moe, or llama as Mixtral): n_experts of width
  // d_ff_expert (a llama's experts are d_ff wide), n_experts_used per token; 0: a dense FFN.
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t d_ff_expert = 0;
  // YaRN with this factor from yarn_original_context positions when the options name no
  // scaling (gpt-oss: 32 from 4096); 0: none.
  double yarn_factor = 0.0;
  int64_t yarn_original_context = 0;

  int64_t head_size() const { return head_dim > 0 ? head_dim : d_model / n_heads; }
  int64_t rotary_dims() const { return rope_dims > 0 ? rope_dims : head_size(); }
  int64_t expert_width() const { return architecture == "llama" || d_ff_expert == 0 ? d_ff : d_ff_expert; }
  bool gpt_oss() const { return architecture == "gpt-oss"; }
};

// The shapes gen-model knows; nullopt for an unknown name.
std::optional<GeneratedShape> find_generated_shape(const std::string& name);
std::vector<std::string> generated_shape_names();

struct GeneratorOptions {
  std::string shape;  // one of generated_shape_names()
  // Matrices and token_embd: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K,
  // Q5_K, Q6_K or IQ4_XS. A gpt-oss shape with MXFP4 gets llama.cpp's MXFP4_MOE mix: the experts
  // MXFP4, the other matrices Q8_0.
  DType type = DType::Q8_0;
  // llama.cpp's Q4_K_M recipe instead of one type: Q4_K, with Q6_K for output.weight and for
  // attn_v / ffn_down in the layers that recipe favours. `type` is ignored when set.
  bool q4_k_m = false;
  // llama.cpp's Q5_K_M recipe: Q4_K_M's with Q5_K as the base type (and Q6_K for Phi-3's
  // attn_qkv). `type` is ignored when set.
  bool q5_k_m = false;
  // llama.cpp's Q3_K_M recipe (for a llama model): Q3_K, with Q6_K for output.weight, Q4_K for
  // attn_output, attn_v Q5_K in the first two layers and Q4_K after, ffn_down Q5_K in the first
  // sixteenth of the layers and Q4_K after. `type` is ignored when set.
  bool q3_k_m = false;
  std::string vocab_path;  // GGUF whose tokenizer.ggml.* keys are copied
  uint64_t seed = 0;
  // The shape's first n_layers layers only (0: all). Tensors are seeded by name, so the result
  // is an exact prefix of the full model: an early-exit draft for speculative decoding.
  int64_t n_layers = 0;
  // The context length the file declares (0: the shape's). Random weights and RoPE have no
  // trained limit, so a small shape may claim a long context (tests that need long outputs).
  int64_t context_length = 0;
  // Multiplies attn_output and ffn_down, i.e. every layer's contribution to the residual
  // stream. Below 1 the later layers change the prediction less, so a layer prefix of the
  // model agrees with the whole more often (a stand-in for a trained draft/target pair).
  float branch_scale = 1.0f;
  // output_norm.weight's value (every other norm weight is 1): the logits are this times those
  // of scale 1 (exactly, for a power of two), the weight tensors' bytes unchanged. Random
  // weights give nearly flat next-token distributions (llama-160m: top log-probabilities near
  // -8.4); a scale of ~16 makes them peaked, as a trained model's are. The argmax, and with it
  // greedy output, does not change with the scale: see bench/AGREEMENT.md.
  float output_scale = 1.0f;
  // RoPE scaling written into the file: "" (the shape's own), none, linear, yarn, longrope or
  // llama3 (rope_freqs.weight), with `rope_factor` (s; 0: 4) and `rope_original_context` (L; 0:
  // the context / s). LongRoPE's s is the context / L, and its factors a fixed smooth curve: long
  // ones from 1 (fastest pair) to s, short ones from 1 to 1.1.
  std::string rope_scaling;
  double rope_factor = 0.0;
  int64_t rope_original_context = 0;
  // A reranker's classification head (server/rank_head.h): cls.output.weight [rank_head,
  // d_model] and cls.output.bias [rank_head], random F32; 0: none.
  int64_t rank_head = 0;
  std::string out_path;
  // Called after each tensor is produced: tensors done, tensors total, bytes done, bytes total.
  std::function<void(int64_t, int64_t, int64_t, int64_t)> progress;
};

// Writes the file. Throws InputError for an unknown shape, an unusable type, a vocabulary
// file without tokenizer.ggml.tokens, or an I/O failure.
void generate_random_gguf(const GeneratorOptions& options);

}  // namespace tandem
