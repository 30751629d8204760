// ModelConfig: the hyperparameters of a Llama-family decoder (llama, qwen2, qwen3, phi3), whatever
// file they came from.
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
  // Linear / YaRN / LongRoPE (model/rope_scaling.h); type None for most models.
  RopeScaling rope_scaling;

  int64_t q_width() const { return n_heads * head_dim; }
  int64_t kv_width() const { return n_kv_heads * head_dim; }
  KvShape kv_shape() const { return {n_layers, n_kv_heads, head_dim}; }
  // Throws InputError naming the first inconsistent value.
  void validate() const;
};

}  // namespace tandem
