// Converts a Hugging Face model folder to a GGUF file llama.cpp can load: llama.cpp's tensor
// names and <arch>.* metadata, Q/K rows in the layout each architecture's RoPE expects
// (llama interleaved, as the HF loader permutes them; qwen2/qwen3/phi3 half-split, as stored;
// phi3's Q/K/V and gate/up fused into attn_qkv and ffn_up), RoPE scaling as rope.scaling.* keys
// (LongRoPE's factors as rope_factors_long/short.weight),
// norms (Qwen3's per-head Q/K norms too) and biases f32, matrices in the requested type, and tokenizer.ggml.*
// keys from tokenizer.json when the folder has one. MXFP4 experts (the released gpt-oss
// checkpoints') are written as they are, whatever the type of the other matrices (file type
// MOSTLY_MXFP4_MOE). No tokenization happens here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/dtype.h"

namespace tandem {

struct HfConvertOptions {
  std::string model_dir;
  std::string out_path;
  // Matrices and token_embd: F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL or MXFP4 (the types of
  // 32-element blocks). Quantized types fall back to F16
  // for matrices whose rows are not a multiple of 32 elements. Experts loaded as MXFP4 stay MXFP4.
  DType type = DType::F16;
  // Called after each tensor is written: tensors done, tensors total, bytes done, bytes total.
  std::function<void(int64_t, int64_t, int64_t, int64_t)> progress;
};

// Throws InputError for an unusable folder (see load_hf_model), an unsupported type or
// tokenizer, or an I/O failure.
void convert_hf_to_gguf(const HfConvertOptions& options);

}  // namespace tandem
