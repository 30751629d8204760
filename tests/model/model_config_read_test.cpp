// read_model_config (issue 36): the configuration that load_model gives, field for field, for
// GGUF files of each family and a llama2.c checkpoint, without the weights: a llama2.c file cut
// after its header still gives it (a load refuses the file), and a bad header is the same one-line
// InputError a load gives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/model.h"
#include "support/random_model.h"

namespace tandem {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tandem-config-read-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

void expect_same_config(const ModelConfig& read, const ModelConfig& loaded) {
  EXPECT_EQ(read.architecture, loaded.architecture);
  EXPECT_EQ(read.d_model, loaded.d_model);
  EXPECT_EQ(read.n_layers, loaded.n_layers);
  EXPECT_EQ(read.n_heads, loaded.n_heads);
  EXPECT_EQ(read.n_kv_heads, loaded.n_kv_heads);
  EXPECT_EQ(read.head_dim, loaded.head_dim);
  EXPECT_EQ(read.d_ff, loaded.d_ff);
  EXPECT_EQ(read.vocab_size, loaded.vocab_size);
  EXPECT_EQ(read.context_length, loaded.context_length);
  EXPECT_EQ(read.rms_norm_eps, loaded.rms_norm_eps);
  EXPECT_EQ(read.rope_freq_base, loaded.rope_freq_base);
  EXPECT_EQ(read.rope_dims, loaded.rope_dims);
  EXPECT_EQ(read.rope_pairing, loaded.rope_pairing);
  EXPECT_EQ(read.qk_norm, loaded.qk_norm);
  EXPECT_EQ(read.rope_freq_factors, loaded.rope_freq_factors);
  EXPECT_EQ(read.sliding_window, loaded.sliding_window);
  EXPECT_EQ(read.local_layers, loaded.local_layers);
  EXPECT_EQ(read.rope_freq_base_local, loaded.rope_freq_base_local);
  EXPECT_EQ(read.gemma_blocks, loaded.gemma_blocks);
  EXPECT_EQ(read.attention_scale, loaded.attention_scale);
  EXPECT_EQ(read.final_logit_softcap, loaded.final_logit_softcap);
  EXPECT_EQ(read.attn_logit_softcap, loaded.attn_logit_softcap);
  EXPECT_EQ(read.n_experts, loaded.n_experts);
  EXPECT_EQ(read.n_experts_used, loaded.n_experts_used);
  EXPECT_EQ(read.d_ff_expert, loaded.d_ff_expert);
  EXPECT_EQ(read.expert_weights_norm, loaded.expert_weights_norm);
  EXPECT_EQ(read.gpt_oss_experts, loaded.gpt_oss_experts);
  EXPECT_EQ(read.attention_sinks, loaded.attention_sinks);
  EXPECT_EQ(read.rope_scaling.type, loaded.rope_scaling.type);
  EXPECT_EQ(read.rope_scaling.factor, loaded.rope_scaling.factor);
  EXPECT_EQ(read.rope_scaling.original_context, loaded.rope_scaling.original_context);
}

TEST(ModelConfigRead, GgufGivesWhatALoadGivesForEachFamily) {
  test_support::RandomModelSpec llama;  // GQA, untied head
  llama.d_model = 64, llama.n_heads = 4, llama.n_kv_heads = 2, llama.d_ff = 96, llama.n_layers = 3, llama.seed = 301;
  test_support::RandomModelSpec qwen3 = llama;  // heads of 32, Q/K norms, tied head
  qwen3.architecture = "qwen3", qwen3.head_size = 32, qwen3.tied_output = true;
  test_support::RandomModelSpec gemma3 = llama;  // local and global layers, soft-capped logits
  gemma3.architecture = "gemma3", gemma3.head_size = 32, gemma3.n_heads = 2, gemma3.n_kv_heads = 1;
  gemma3.sliding_window = 6, gemma3.window_pattern = 2, gemma3.tied_output = true, gemma3.final_logit_softcap = 3.0f;
  test_support::RandomModelSpec moe = llama;  // 4 experts of 64, 2 used
  moe.architecture = "qwen3moe", moe.head_size = 16, moe.n_experts = 4, moe.n_experts_used = 2, moe.d_ff_expert = 64;
  test_support::RandomModelSpec yarn = llama;
  yarn.rope_scaling_type = "yarn", yarn.rope_scaling_factor = 4.0f, yarn.yarn_original = 32;
  for (const test_support::RandomModelSpec& spec : {llama, qwen3, gemma3, moe, yarn}) {
    SCOPED_TRACE(spec.architecture + (spec.rope_scaling_type.empty() ? "" : " " + spec.rope_scaling_type));
    const std::string path = temp_path(spec.architecture + ".gguf");
    test_support::write_random_model(spec, path);
    const ModelConfig read = read_model_config(path);
    expect_same_config(read, load_model(path)->config);
    EXPECT_EQ(read.n_layers, spec.n_layers);
    std::filesystem::remove(path);
  }
}

// A llama2.c checkpoint: a header of 7 int32, then f32 tensors (llama2c_model_loader.cpp).
void write_llama2c(const std::string& path, bool header_only) {
  const int32_t d = 16, ff = 24, layers = 3, heads = 2, kv_heads = 2, vocab = 40, ctx = 32;
  const int32_t header[7] = {d, ff, layers, heads, kv_heads, -vocab, ctx};  // negative: own classifier
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header), sizeof(header));
  if (header_only) return;
  const int64_t half_head = d / heads / 2, kv = kv_heads * (d / heads);
  const int64_t floats = int64_t{vocab} * d + layers * d + layers * d * d + 2 * layers * d * kv + layers * d * d +
                         layers * d + 3 * int64_t{layers} * ff * d + d + 2 * int64_t{ctx} * half_head + vocab * d;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> values(static_cast<size_t>(floats));
  for (float& v : values) v = normal(rng);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
}

TEST(ModelConfigRead, Llama2cGivesWhatALoadGivesAndNeedsNoWeights) {
  const std::string whole = temp_path("whole.bin");
  write_llama2c(whole, false);
  const ModelConfig read = read_model_config(whole);
  expect_same_config(read, load_model(whole)->config);
  EXPECT_EQ(read.n_layers, 3);
  EXPECT_EQ(read.vocab_size, 40);

  // The header alone: the configuration is there, the weights are not (a load says so).
  const std::string header_only = temp_path("header.bin");
  write_llama2c(header_only, true);
  expect_same_config(read_model_config(header_only), read);
  EXPECT_THROW(load_model(header_only), InputError);
  std::filesystem::remove(whole);
  std::filesystem::remove(header_only);
}

TEST(ModelConfigRead, BadHeadersAreTheLoadsOneLineErrors) {
  const std::string path = temp_path("bad.bin");
  {
    std::ofstream out(path, std::ios::binary);
    const int32_t header[7] = {15, 24, 3, 2, 2, 40, 32};  // 15 is not a multiple of 2 heads
    out.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  try {
    read_model_config(path);
    ADD_FAILURE() << "no error";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("not a multiple of the head count"), std::string::npos) << error.what();
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write("abcd", 4);
  }
  EXPECT_THROW(read_model_config(path), InputError);
  EXPECT_THROW(read_model_config(temp_path("missing.gguf")), InputError);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace tandem
