// ModelConfig: the hyperparameters of a Llama-family decoder (llama, qwen2, qwen3, qwen3moe, gemma2,
// gemma3, phi3, gpt-oss; Mixtral as a llama with experts), whatever file they came from.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_shape.h"
#include "model/rope_scaling.h"

namespace tandem {

// Which elements of a head the weights' Q/K rows make rotate together. llama.cpp's "normal"
// RoPE (GGUF `llama`, and HF llama folders after the loader's row permutation) pairs adjacent
// elements (2i, 2i+1); its NEOX RoPE (GGUF `qwen2`, `qwen3`, and HF's rotate_half) pairs i
// with i + rope_dims/2. The RoPE kernel rotates adjacent pairs, so for HalfSplit the forward
// pass reorders each head's Q/K before rotating (q·k does not change when both are reordered).
enum class RopePairing { Adjacent, HalfSplit };

struct ModelConfig {
  std::string architecture = "llama";
  int64_t d_model = 0;  // embedding width
  int64_t n_layers = 0;
  int64_t n_heads = 0;     // query heads
  int64_t n_kv_heads = 0;  // key/value heads (< n_heads: grouped-query attention)
  int64_t head_dim = 0;    // per head; d_model / n_heads unless the file says (qwen3: key_length)
  int64_t d_ff = 0;        // SwiGLU hidden width
  int64_t vocab_size = 0;
  int64_t context_length = 0;  // positions the model was trained for
  float rms_norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  int64_t rope_dims = 0;  // rotary dimensions per head (<= head_dim), paired as rope_pairing says
  RopePairing rope_pairing = RopePairing::Adjacent;
  // Qwen3: RMSNorm of each Q and K head (weights [head_dim]) after the projection, before RoPE.
  bool qk_norm = false;
  // Per-pair frequency divisors [rope_dims / 2] (Llama 3 rope_scaling; GGUF rope_freqs.weight):
  // pair i turns at base^(-2i/rope_dims) / factor[i]. Empty: all 1.
  std::vector<float> rope_freq_factors;
  // Sliding-window attention (Mistral; gemma3's local layers): in a local layer the token at
  // position p attends to positions (p - sliding_window, p]. 0: no window anywhere.
  int64_t sliding_window = 0;
  // [n_layers] 1 for a local (windowed) layer; empty with a window: every layer is local.
  std::vector<uint8_t> local_layers;
  // The local layers' RoPE base (gemma3: 10000 while the global layers use rope_freq_base);
  // 0: rope_freq_base.
  float rope_freq_base_local = 0.0f;
  // Gemma blocks: GeGLU FFN (tanh-form GELU), RMSNorms after attention and after the FFN,
  // embeddings times sqrt(d_model) (gemma2, gemma3).
  bool gemma_blocks = false;
  // Attention scores are q·k times this; 0: 1/sqrt(head_dim) (gemma3: 1/sqrt(query_pre_attn_scalar)).
  float attention_scale = 0.0f;
  // Logits become cap * tanh(logits / cap) when > 0 (Gemma's final soft-capping).
  float final_logit_softcap = 0.0f;
  // Attention scores (after the scale) become cap * tanh(score / cap) before the softmax when
  // > 0 (Gemma 2: 50).
  float attn_logit_softcap = 0.0f;

  // The window layer `layer` attends within; 0 for a global layer.
  int64_t layer_window(int64_t layer) const {
    if (sliding_window == 0) return 0;
    return local_layers.empty() || local_layers[static_cast<size_t>(layer)] != 0 ? sliding_window : 0;
  }
  float layer_rope_base(int64_t layer) const {
    return layer_window(layer) > 0 && rope_freq_base_local > 0.0f ? rope_freq_base_local : rope_freq_base;
  }
  // Positions further behind than this are never read again by any layer, so the KV cache may
  // drop them: the window when every layer is local, else 0 (keep everything).
  int64_t kv_window() const {
    for (int64_t l = 0; l < n_layers; ++l)
      if (layer_window(l) == 0) return 0;
    return sliding_window;
  }
  // Mixture of experts (qwen3moe, Mixtral): when n_experts > 0 every layer's FFN is a router
  // [n_experts, d_model] and n_experts SwiGLU experts of width d_ff_expert; each token runs the
  // n_experts_used experts of highest router probability (softmax over all experts) and sums
  // their outputs weighted by those probabilities, renormalised to sum to 1 when
  // expert_weights_norm (Mixtral always; qwen3moe's norm_topk_prob). 0: a dense FFN of d_ff.
  int64_t n_experts = 0;
  int64_t n_experts_used = 0;
  int64_t d_ff_expert = 0;
  bool expert_weights_norm = true;
  // gpt-oss's experts: the n_experts_used largest router logits (router bias added) are chosen
  // first and their weights are the softmax over those logits alone (llama.cpp's SOFTMAX_WEIGHT
  // gating; expert_weights_norm does not apply), and every expert's FFN is clamped SwiGLU with
  // biases after each of its projections (kernels/swiglu_oai.h).
  bool gpt_oss_experts = false;
  // gpt-oss: every query head has a learned sink logit in its softmax (LayerWeights::sinks).
  bool attention_sinks = false;

  // Linear / YaRN / LongRoPE (model/rope_scaling.h); type None for most models.
  RopeScaling rope_scaling;

  bool has_experts() const { return n_experts > 0; }
  int64_t q_width() const { return n_heads * head_dim; }
  int64_t kv_width() const { return n_kv_heads * head_dim; }
  KvShape kv_shape() const { return {n_layers, n_kv_heads, head_dim}; }
  // How many attended positions cost as much as one token's matrix products (2 FLOPs a weight
  // against 4 * head_dim a query head, over the layers without a window): a token at depth d
  // costs about 1 + d / this tokens at depth 0. 0 when every layer has a window (its cost
  // does not grow with the depth). What the scheduler weighs prefill chunks by.
  double attention_depth_equivalent() const;
  // Throws InputError naming the first inconsistent value.
  void validate() const;
};

}  // namespace tandem
