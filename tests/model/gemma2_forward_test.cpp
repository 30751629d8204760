// Gemma 2 through the forward pass, against the float64 reference of windowed_reference.h
// (written from the Gemma 2 definition): Gemma blocks without Q/K norms, even layers local
// with one RoPE base, attention scores soft-capped before the softmax, soft-capped logits.
// Each of those left out of the reference is a different model (the comparison can fail).
// Then prefill == chunks == decode past the window bit for bit, the attention cap changes the
// logits, and malformed gemma2 keys are one-line errors naming the file.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "model/attention_window.h"
#include "model/forward.h"
#include "model/forward_steps.h"
#include "model/windowed_reference.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using test_reference::random_tokens;
using test_reference::reference_logits;
using test_reference::run_in_steps;
using test_reference::Variant;
using test_reference::worst_relative_error;
using test_support::RandomModelSpec;
using test_support::RandomWeights;
using test_support::TempDir;

// 4 layers (0 and 2 local), heads of 20 over d_model 48, GQA, tied head, window 6. The random
// weights give attention scores of order 1, so a cap of 2 bends them (Gemma 2's 50 would
// barely show at this size); the final cap of 3 bends the logits.
RandomModelSpec gemma2_spec() {
  RandomModelSpec spec;
  spec.architecture = "gemma2", spec.d_model = 48, spec.n_heads = 3, spec.n_kv_heads = 1, spec.head_size = 20;
  spec.n_layers = 4, spec.sliding_window = 6, spec.tied_output = true, spec.rms_norm_eps = 1e-6f;
  spec.attn_logit_softcap = 2.0f, spec.final_logit_softcap = 3.0f, spec.context_length = 128, spec.seed = 201;
  return spec;
}

class Gemma2ForwardTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> load(const RandomModelSpec& spec, RandomWeights& weights, const char* name = "g2.gguf") {
    const std::string path = dir_.file(name);
    weights = test_support::write_random_model(spec, path);
    return load_model(path);
  }
  // The file of `spec` with metadata key `key` set to `value` (or removed when value is null).
  std::string with_key(const RandomModelSpec& spec, const std::string& key, const GgufValue* value) {
    const std::string path = dir_.file("full.gguf");
    test_support::write_random_model(spec, path);
    GgufFile file = GgufFile::open(path);
    GgufWriter writer;
    for (const auto& [name, old] : file.metadata())
      if (name != key) writer.set(name, old);
    if (value != nullptr) writer.set(key, *value);
    for (const GgufTensorInfo& info : file.tensors()) {
      const auto* bytes = static_cast<const uint8_t*>(info.view.data);
      std::vector<int64_t> shape(info.view.shape.begin(), info.view.shape.begin() + info.view.n_dims);
      writer.add_tensor(info.name, info.view.dtype, shape, std::vector<uint8_t>(bytes, bytes + info.view.n_bytes()));
    }
    const std::string out = dir_.file("edited-" + std::to_string(getpid()) + ".gguf");
    writer.write(out);
    return out;
  }
  TempDir dir_;
  ThreadPool pool_{2};
};

TEST_F(Gemma2ForwardTest, LoadsEvenLayersLocalAndBothCaps) {
  const RandomModelSpec spec = gemma2_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  const ModelConfig& c = model->config;
  EXPECT_EQ(c.architecture, "gemma2");
  EXPECT_TRUE(c.gemma_blocks);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.rope_pairing, RopePairing::HalfSplit);
  EXPECT_EQ(c.head_dim, 20);
  EXPECT_EQ(c.local_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(c.layer_rope_base(0), c.layer_rope_base(1));
  EXPECT_EQ(c.kv_window(), 0) << "global layers read every position";
  EXPECT_EQ(c.attn_logit_softcap, 2.0f);
  EXPECT_EQ(c.final_logit_softcap, 3.0f);
  EXPECT_EQ(c.attention_scale, 0.0f) << "1/sqrt(head_dim), the kernel's own";
  EXPECT_EQ(model->weights.layers[0].q_norm.data, nullptr);
  EXPECT_EQ(model->weights.layers[1].post_attn_norm.f32()[4], weights.layers[1].post_attn_norm[4]);
  EXPECT_EQ(model->weights.output.data, model->weights.token_embedding.data);
  EXPECT_EQ(describe_attention_window(c), "6 positions, 2 of 4 layers local, global layers 1,3");
}

// Without the keys, llama.cpp's defaults: window 4096, caps 50 and 30.
TEST_F(Gemma2ForwardTest, MissingKeysTakeGemma2Defaults) {
  RandomModelSpec spec = gemma2_spec();
  spec.attn_logit_softcap = 0.0f, spec.final_logit_softcap = 0.0f, spec.sliding_window = 0;
  RandomWeights weights;
  const auto model = load(spec, weights);
  EXPECT_EQ(model->config.sliding_window, 4096);
  EXPECT_EQ(model->config.attn_logit_softcap, 50.0f);
  EXPECT_EQ(model->config.final_logit_softcap, 30.0f);
}

TEST_F(Gemma2ForwardTest, PrefillMatchesReferenceAndEachPartMatters) {
  const RandomModelSpec spec = gemma2_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  Forward forward(model, 64, pool_);
  const std::vector<int32_t> tokens = random_tokens(30, spec.vocab_size, 211);
  const std::vector<float> engine = run_in_steps(forward, tokens, 30);
  EXPECT_LE(worst_relative_error(engine, reference_logits(spec, weights, tokens), spec.vocab_size), 1e-4);
  const std::vector<std::pair<const char*, Variant>> wrong = {
      {"no attention soft-capping", {.no_attn_softcap = true}},
      {"odd layers local", {.odd_layers_local = true}},
      {"no window", {.no_window = true}},
      {"SwiGLU", {.silu_ffn = true}},
      {"no post norms", {.no_post_norms = true}},
      {"no embedding scale", {.no_embedding_scale = true}},
      {"no final soft-capping", {.no_softcap = true}},
  };
  for (const auto& [name, variant] : wrong)
    EXPECT_GT(worst_relative_error(engine, reference_logits(spec, weights, tokens, variant), spec.vocab_size), 1e-3)
        << name << " should be a different model";
}

TEST_F(Gemma2ForwardTest, PrefillEqualsChunkedAndTokenByTokenDecode) {
  const RandomModelSpec spec = gemma2_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  Forward forward(model, 64, pool_);
  const std::vector<int32_t> tokens = random_tokens(33, spec.vocab_size, 212);
  const std::vector<float> whole = run_in_steps(forward, tokens, 33);
  const std::vector<float> chunked = run_in_steps(forward, tokens, 7);
  const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
  ASSERT_EQ(whole.size(), chunked.size());
  ASSERT_EQ(whole.size(), decoded.size());
  EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0);
  EXPECT_LE(worst_relative_error(decoded, reference_logits(spec, weights, tokens), spec.vocab_size), 1e-4);
}

// The same weights (same seed) at Gemma 2's cap of 50 and at 2: the engine's logits differ, and
// each matches the reference at its own cap.
TEST_F(Gemma2ForwardTest, AttentionCapChangesTheLogits) {
  RandomModelSpec spec50 = gemma2_spec();
  spec50.attn_logit_softcap = 50.0f;
  const RandomModelSpec spec2 = gemma2_spec();
  RandomWeights weights50, weights2;
  const auto model50 = load(spec50, weights50, "cap50.gguf");
  const auto model2 = load(spec2, weights2, "cap2.gguf");
  Forward forward50(model50, 64, pool_), forward2(model2, 64, pool_);
  const std::vector<int32_t> tokens = random_tokens(20, spec2.vocab_size, 213);
  const std::vector<float> logits50 = run_in_steps(forward50, tokens, 20);
  const std::vector<float> logits2 = run_in_steps(forward2, tokens, 20);
  ASSERT_EQ(logits50.size(), logits2.size());
  EXPECT_GT(worst_relative_error(logits50, reference_logits(spec2, weights2, tokens), spec2.vocab_size), 1e-3);
  EXPECT_LE(worst_relative_error(logits50, reference_logits(spec50, weights50, tokens), spec50.vocab_size), 1e-4);
  EXPECT_LE(worst_relative_error(logits2, reference_logits(spec2, weights2, tokens), spec2.vocab_size), 1e-4);
}

void expect_one_line_error(const std::string& path, const std::string& needle) {
  try {
    load_model(path);
    ADD_FAILURE() << "loaded " << path << " (expected an error containing '" << needle << "')";
  } catch (const InputError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_NE(what.find(path), std::string::npos) << "names the file: " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST_F(Gemma2ForwardTest, MalformedKeysAreOneLineErrors) {
  const RandomModelSpec spec = gemma2_spec();
  const GgufValue negative = GgufValue::f32(-1.0f), zero = GgufValue::f32(0.0f), infinite = GgufValue::f32(INFINITY),
                  no_window = GgufValue::u32(0);
  expect_one_line_error(with_key(spec, "gemma2.attn_logit_softcapping", &negative), "gemma2.attn_logit_softcapping");
  expect_one_line_error(with_key(spec, "gemma2.attn_logit_softcapping", &zero), "gemma2.attn_logit_softcapping");
  expect_one_line_error(with_key(spec, "gemma2.final_logit_softcapping", &infinite), "gemma2.final_logit_softcapping");
  expect_one_line_error(with_key(spec, "gemma2.attention.sliding_window", &no_window), "sliding_window");
  expect_one_line_error(with_key(spec, "gemma2.block_count", nullptr), "gemma2.block_count");
}

TEST_F(Gemma2ForwardTest, MissingPostNormOrQkNormsWhereNoneBelong) {
  const RandomModelSpec spec = gemma2_spec();
  const std::string path = dir_.file("full.gguf");
  test_support::write_random_model(spec, path);
  GgufFile file = GgufFile::open(path);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  for (const GgufTensorInfo& info : file.tensors()) {
    if (info.name == "blk.1.post_attention_norm.weight") continue;
    const auto* bytes = static_cast<const uint8_t*>(info.view.data);
    std::vector<int64_t> shape(info.view.shape.begin(), info.view.shape.begin() + info.view.n_dims);
    writer.add_tensor(info.name, info.view.dtype, shape, std::vector<uint8_t>(bytes, bytes + info.view.n_bytes()));
  }
  const std::string broken = dir_.file("no_post_norm.gguf");
  writer.write(broken);
  expect_one_line_error(broken, "missing tensor 'blk.1.post_attention_norm.weight'");
}

}  // namespace
}  // namespace tandem
