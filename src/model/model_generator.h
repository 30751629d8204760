// Random-weight Llama GGUF files of known shapes (llama-160m, tinyllama-1.1b, test-tiny,
// test-kquant), for benchmarks and tests without downloading a model. The tokenizer is copied from a
// vocabulary GGUF. Output is a pure function of (shape, type, vocabulary, seed).
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
};

// The shapes gen-model knows; nullopt for an unknown name.
std::optional<GeneratedShape> find_generated_shape(const std::string& name);
std::vector<std::string> generated_shape_names();

struct GeneratorOptions {
  std::string shape;         // one of generated_shape_names()
  DType type = DType::Q8_0;  // F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K (matrices and token_embd)
  // llama.cpp's Q4_K_M recipe instead of one type: Q4_K, with Q6_K for output.weight and for
  // attn_v / ffn_down in the layers that recipe favours. `type` is ignored when set.
  bool q4_k_m = false;
  std::string vocab_path;  // GGUF whose tokenizer.ggml.* keys are copied
  uint64_t seed = 0;
  // output_norm.weight's value (every other norm weight is 1): the logits are this times those
  // of scale 1 (exactly, for a power of two), the weight tensors' bytes unchanged. Random
  // weights give nearly flat next-token distributions (llama-160m: top log-probabilities near
  // -8.4); a scale of ~16 makes them peaked, as a trained model's are. The argmax, and with it
  // greedy output, does not change with the scale: see bench/AGREEMENT.md.
  float output_scale = 1.0f;
  std::string out_path;
  // Called after each tensor is produced: tensors done, tensors total, bytes done, bytes total.
  std::function<void(int64_t, int64_t, int64_t, int64_t)> progress;
};

// Writes the file. Throws InputError for an unknown shape, an unusable type, a vocabulary
// file without tokenizer.ggml.tokens, or an I/O failure.
void generate_random_gguf(const GeneratorOptions& options);

}  // namespace tandem
