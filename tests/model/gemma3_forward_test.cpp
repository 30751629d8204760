// Gemma 3 through the forward pass, against the float64 reference of windowed_reference.h
// (written from the Gemma 3 definition): embeddings times sqrt(d_model), per-head Q/K norms,
// post-attention and post-FFN norms, GeGLU, local layers with a window and a RoPE base of their
// own between global ones, soft-capped logits. Each of those left out of the reference is a
// different model (the comparison can fail). Then prefill == chunks == decode past the window,
// bit for bit, and the loader's view of the file.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
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

// 4 layers, every 2nd global; heads of 20 over d_model 48 (not 16), GQA, tied head, window 6.
RandomModelSpec gemma3_spec() {
  RandomModelSpec spec;
  spec.architecture = "gemma3", spec.d_model = 48, spec.n_heads = 3, spec.n_kv_heads = 1, spec.head_size = 20;
  spec.n_layers = 4, spec.sliding_window = 6, spec.window_pattern = 2, spec.tied_output = true;
  spec.rope_freq_base = 1000000.0f, spec.rope_freq_base_local = 10000.0f, spec.rms_norm_eps = 1e-6f;
  spec.final_logit_softcap = 3.0f, spec.context_length = 128, spec.seed = 101;
  return spec;
}

class Gemma3ForwardTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> load(const RandomModelSpec& spec, RandomWeights& weights) {
    const std::string path = dir_.file("gemma3.gguf");
    weights = test_support::write_random_model(spec, path);
    return load_model(path);
  }
  TempDir dir_;
  ThreadPool pool_{2};
};

TEST_F(Gemma3ForwardTest, LoadsLocalAndGlobalLayersAndTheExtraNorms) {
  const RandomModelSpec spec = gemma3_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  const ModelConfig& c = model->config;
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_TRUE(c.gemma_blocks);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(c.rope_pairing, RopePairing::HalfSplit);
  EXPECT_EQ(c.head_dim, 20);
  EXPECT_EQ(c.sliding_window, 6);
  EXPECT_EQ(c.local_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(c.layer_window(0), 6);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_EQ(c.layer_rope_base(0), 10000.0f);
  EXPECT_EQ(c.layer_rope_base(1), 1000000.0f);
  EXPECT_EQ(c.kv_window(), 0) << "global layers read every position: nothing may be dropped";
  EXPECT_EQ(c.final_logit_softcap, 3.0f);
  EXPECT_EQ(model->weights.layers[2].post_ffn_norm.f32()[5], weights.layers[2].post_ffn_norm[5]);
  EXPECT_EQ(model->weights.layers[3].post_attn_norm.f32()[7], weights.layers[3].post_attn_norm[7]);
  EXPECT_EQ(model->weights.output.data, model->weights.token_embedding.data);
  EXPECT_EQ(describe_attention_window(c), "6 positions, 2 of 4 layers local, global layers 1,3, local RoPE base 10000");
}

TEST_F(Gemma3ForwardTest, PrefillMatchesReferenceAndEachPartMatters) {
  const RandomModelSpec spec = gemma3_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  Forward forward(model, 64, pool_);
  const std::vector<int32_t> tokens = random_tokens(30, spec.vocab_size, 111);
  const std::vector<float> engine = run_in_steps(forward, tokens, 30);
  EXPECT_LE(worst_relative_error(engine, reference_logits(spec, weights, tokens), spec.vocab_size), 1e-4);
  const std::vector<std::pair<const char*, Variant>> wrong = {
      {"no window", {.no_window = true}},
      {"global RoPE base in local layers", {.global_rope_everywhere = true}},
      {"SwiGLU", {.silu_ffn = true}},
      {"no post norms", {.no_post_norms = true}},
      {"no embedding scale", {.no_embedding_scale = true}},
      {"no soft-capping", {.no_softcap = true}},
  };
  for (const auto& [name, variant] : wrong)
    EXPECT_GT(worst_relative_error(engine, reference_logits(spec, weights, tokens, variant), spec.vocab_size), 1e-3)
        << name << " should be a different model";
}

TEST_F(Gemma3ForwardTest, PrefillEqualsChunkedAndTokenByTokenDecode) {
  const RandomModelSpec spec = gemma3_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  Forward forward(model, 64, pool_);
  const std::vector<int32_t> tokens = random_tokens(33, spec.vocab_size, 112);
  const std::vector<float> whole = run_in_steps(forward, tokens, 33);
  const std::vector<float> chunked = run_in_steps(forward, tokens, 7);
  const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
  ASSERT_EQ(whole.size(), chunked.size());
  ASSERT_EQ(whole.size(), decoded.size());
  EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0);
  EXPECT_LE(worst_relative_error(decoded, reference_logits(spec, weights, tokens), spec.vocab_size), 1e-4);
}

// Sequence A alone (1 thread, one prefill) equals A sharing its batches (2 threads) with B, part
// prefill and part decode, past the window, bit for bit.
TEST_F(Gemma3ForwardTest, BatchInvariance) {
  const RandomModelSpec spec = gemma3_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  const int64_t vocab = spec.vocab_size;
  const std::vector<int32_t> a = random_tokens(20, vocab, 121), b = random_tokens(16, vocab, 122);
  ThreadPool one(1);
  Forward alone_forward(model, 64, one);
  const std::vector<float> alone = run_in_steps(alone_forward, a, 20);

  Forward mixed_forward(model, 64, pool_);
  KvCache cache(model->config.kv_shape(), 16, 4);
  const std::vector<int32_t> blocks_b = {11, 3, 9, 0}, blocks_a = {1, 10, 2, 8, 5};
  std::vector<float> mixed(alone.size());
  Batch batch;
  batch.add_sequence(blocks_b);
  batch.add_sequence(blocks_a);
  for (int32_t p = 0; p < 9; ++p) batch.add(b[p], p, 0, true);
  for (int32_t p = 0; p < 8; ++p) batch.add(a[p], p, 1, true);
  std::span<const float> out = mixed_forward.run(batch, cache);
  std::copy_n(out.data() + 9 * vocab, 8 * vocab, mixed.data());
  int32_t next_b = 9;
  for (int32_t p = 8; p < 20; p += 3) {
    batch.clear();
    batch.add_sequence(blocks_b);
    batch.add_sequence(blocks_a);
    if (next_b < 16) batch.add(b[next_b], next_b, 0, true), ++next_b;
    for (int32_t i = p; i < p + 3; ++i) batch.add(a[i], i, 1, true);
    out = mixed_forward.run(batch, cache);
    const int64_t skip = batch.seq_ids[0] == 0 ? 1 : 0;
    std::copy_n(out.data() + skip * vocab, 3 * vocab, mixed.data() + p * vocab);
  }
  EXPECT_EQ(std::memcmp(alone.data(), mixed.data(), alone.size() * sizeof(float)), 0)
      << "sequence A's logits changed with its batch";
}

// sliding_window_pattern 0: every layer local, so the cache may forget behind the window.
TEST_F(Gemma3ForwardTest, PatternZeroMakesEveryLayerLocal) {
  RandomModelSpec spec = gemma3_spec();
  spec.window_pattern = 0, spec.final_logit_softcap = 0.0f;
  RandomWeights weights;
  const auto model = load(spec, weights);
  EXPECT_EQ(model->config.kv_window(), 6);
  Forward forward(model, 64, pool_);
  const std::vector<int32_t> tokens = random_tokens(20, spec.vocab_size, 113);
  EXPECT_LE(
      worst_relative_error(run_in_steps(forward, tokens, 20), reference_logits(spec, weights, tokens), spec.vocab_size),
      1e-4);
}

TEST_F(Gemma3ForwardTest, MissingPostNormIsAOneLineError) {
  const RandomModelSpec spec = gemma3_spec();
  const std::string path = dir_.file("full.gguf");
  test_support::write_random_model(spec, path);
  GgufFile file = GgufFile::open(path);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  for (const GgufTensorInfo& info : file.tensors()) {
    if (info.name == "blk.2.post_ffw_norm.weight") continue;
    const auto* bytes = static_cast<const uint8_t*>(info.view.data);
    std::vector<int64_t> shape(info.view.shape.begin(), info.view.shape.begin() + info.view.n_dims);
    writer.add_tensor(info.name, info.view.dtype, shape, std::vector<uint8_t>(bytes, bytes + info.view.n_bytes()));
  }
  writer.write(dir_.file("no_post_norm.gguf"));
  try {
    load_model(dir_.file("no_post_norm.gguf"));
    ADD_FAILURE() << "loaded a gemma3 file without blk.2.post_ffw_norm.weight";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("missing tensor 'blk.2.post_ffw_norm.weight'"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace tandem
