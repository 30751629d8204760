// gpt-oss through the forward pass against the float64 reference in gpt_oss_reference.h
// (attention sinks, biases everywhere, alternating window, YaRN, top-k-then-softmax routing,
// clamped SwiGLU experts), with seven wrong variants each far outside the tolerance; prefill ==
// chunks == decode bit for bit past the window; batch invariance (a sequence's logits do not
// depend on the sequence sharing its batches); the router's gating on its own; swiglu_oai against
// its formula in double; and malformed files (a missing sink or bias, a missing window key, a
// truncated file), each a one-line InputError naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "kernels/swiglu_oai.h"
#include "model/forward.h"
#include "model/forward_steps.h"
#include "model/gpt_oss_reference.h"
#include "model/moe_router.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using gpt_oss_reference::reference_logits;
using gpt_oss_reference::Variant;
using rope_test::worst_relative_error;
using test_reference::random_tokens;
using test_reference::run_in_steps;
using test_support::RandomModelSpec;
using test_support::RandomWeights;
using test_support::TempDir;

// Odd sizes where F32 allows: heads of 12 while d_model / n_heads is 10, 5 experts of width 37,
// 3 used, window 8 (30 tokens pass it), YaRN 4x from 16 positions.
RandomModelSpec gpt_oss_spec(DType dtype = DType::F32) {
  RandomModelSpec s;
  s.architecture = "gpt-oss";
  s.d_model = 40, s.n_layers = 3, s.n_heads = 4, s.n_kv_heads = 2, s.head_size = 12;
  s.n_experts = 5, s.n_experts_used = 3, s.d_ff_expert = 37, s.d_ff = 37;
  s.sliding_window = 8, s.context_length = 64, s.rope_freq_base = 150000.0f;
  s.yarn_factor = 4.0, s.yarn_original = 16;
  s.seed = 91;
  if (dtype != DType::F32) {  // whole 32-blocks
    s.dtype = dtype, s.d_model = 64, s.head_size = 32, s.d_ff_expert = 64, s.d_ff = 64;
  }
  return s;
}

class GptOssForwardTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> load(const RandomModelSpec& spec, RandomWeights& weights, const std::string& name) {
    const std::string path = dir_.file(name + ".gguf");
    weights = test_support::write_random_model(spec, path);
    return load_model(path);
  }
  TempDir dir_;
  ThreadPool pool_{2};
};

TEST_F(GptOssForwardTest, LoadsItsConfigAndWeights) {
  RandomWeights weights;
  const RandomModelSpec spec = gpt_oss_spec();
  const auto model = load(spec, weights, "config");
  const ModelConfig& c = model->config;
  EXPECT_EQ(c.architecture, "gpt-oss");
  EXPECT_EQ(c.head_dim, 12);
  EXPECT_TRUE(c.gpt_oss_experts);
  EXPECT_TRUE(c.attention_sinks);
  EXPECT_EQ(c.d_ff_expert, 37);
  EXPECT_EQ(c.rope_pairing, RopePairing::HalfSplit);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_EQ(c.layer_window(0), 8);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_EQ(c.layer_window(2), 8);
  EXPECT_EQ(c.kv_window(), 0);  // global layers read everything: no block may be dropped
  const LayerWeights& layer = model->weights.layers[1];
  ASSERT_NE(layer.sinks.data, nullptr);
  EXPECT_EQ(layer.sinks.f32()[3], weights.layers[1].sinks[3]);
  EXPECT_EQ(layer.bo.f32()[5], weights.layers[1].bo[5]);
  EXPECT_EQ(layer.router_bias.f32()[4], weights.layers[1].router_bias[4]);
  ASSERT_EQ(layer.expert_down_bias.size(), 5u);
  EXPECT_EQ(layer.expert_down_bias[4].f32()[39], weights.layers[1].expert_down_bias[4][39]);
  EXPECT_EQ(layer.expert_gate_bias[2].f32()[36], weights.layers[1].expert_gate_bias[2][36]);
  EXPECT_NE(model->weights.output.data, model->weights.token_embedding.data);
}

// One prefill of 30 tokens (the window of 8 passed several times) against the reference; each
// wrong variant is a different model, far outside the tolerance.
TEST_F(GptOssForwardTest, PrefillMatchesReference) {
  RandomWeights weights;
  const RandomModelSpec spec = gpt_oss_spec();
  const auto model = load(spec, weights, "f32");
  Forward forward(model, 32, pool_);
  const std::vector<int32_t> tokens = random_tokens(30, spec.vocab_size, 71);
  const std::vector<float> engine = run_in_steps(forward, tokens, 30);
  const int64_t vocab = spec.vocab_size;
  EXPECT_LE(worst_relative_error(engine, reference_logits(spec, weights, tokens), vocab), 1e-4);
  const std::vector<std::pair<const char*, Variant>> wrong = {
      {"no sinks", {.no_sinks = true}},         {"odd layers local", {.odd_layers_local = true}},
      {"no window", {.no_window = true}},       {"softmax over all experts", {.softmax_all = true}},
      {"plain SwiGLU", {.plain_swiglu = true}}, {"no biases", {.no_biases = true}},
      {"no YaRN", {.no_yarn = true}},
  };
  for (const auto& [name, variant] : wrong)
    EXPECT_GT(worst_relative_error(engine, reference_logits(spec, weights, tokens, variant), vocab), 1e-3) << name;
}

// Q8_0 weights (8-bit activations too): near the exact reference, as the other quantized
// forward tests hold it.
TEST_F(GptOssForwardTest, Q8PrefillNearReference) {
  RandomWeights weights;
  const RandomModelSpec spec = gpt_oss_spec(DType::Q8_0);
  const auto model = load(spec, weights, "q8");
  Forward forward(model, 32, pool_);
  const std::vector<int32_t> tokens = random_tokens(20, spec.vocab_size, 73);
  const std::vector<float> engine = run_in_steps(forward, tokens, 20);
  EXPECT_LE(worst_relative_error(engine, reference_logits(spec, weights, tokens), spec.vocab_size), 5e-2);
}

// Prefill in one batch == chunks of 5 == a token per call (decode), bit for bit, past the window.
TEST_F(GptOssForwardTest, PrefillEqualsChunkedAndTokenByTokenDecode) {
  for (DType dtype : {DType::F32, DType::Q8_0}) {
    RandomWeights weights;
    const RandomModelSpec spec = gpt_oss_spec(dtype);
    const auto model = load(spec, weights, std::string(dtype_name(dtype)));
    Forward forward(model, 32, pool_);
    const std::vector<int32_t> tokens = random_tokens(27, spec.vocab_size, 72);
    const std::vector<float> whole = run_in_steps(forward, tokens, 27);
    const std::vector<float> chunked = run_in_steps(forward, tokens, 5);
    const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
    ASSERT_EQ(whole.size(), chunked.size());
    ASSERT_EQ(whole.size(), decoded.size());
    EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0) << dtype_name(dtype);
    EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0) << dtype_name(dtype);
  }
}

// Sequence A alone (1 thread) equals, bit for bit, A sharing every batch (2 threads) with
// sequence B — a prefill of both, then decode steps of both — whatever experts B's tokens pick.
TEST_F(GptOssForwardTest, BatchInvariance) {
  RandomWeights weights;
  const RandomModelSpec spec = gpt_oss_spec();
  const auto model = load(spec, weights, "batch");
  const int64_t vocab = spec.vocab_size;
  const std::vector<int32_t> a = random_tokens(20, vocab, 81), b = random_tokens(17, vocab, 82);
  ThreadPool one(1);
  Forward alone_forward(model, 64, one);
  const std::vector<float> alone = run_in_steps(alone_forward, a, 20);
  Forward mixed_forward(model, 64, pool_);
  KvCache cache(model->config.kv_shape(), 12, 4);
  const std::vector<int32_t> blocks_b = {11, 3, 9, 0, 6}, blocks_a = {1, 10, 2, 8, 5};
  std::vector<float> mixed;
  Batch batch;
  batch.add_sequence(blocks_b);  // id 0
  batch.add_sequence(blocks_a);  // id 1
  for (int32_t p = 0; p < 12; ++p) batch.add(b[p], p, 0, true);
  for (int32_t p = 0; p < 9; ++p) batch.add(a[p], p, 1, true);
  std::span<const float> out = mixed_forward.run(batch, cache);
  mixed.insert(mixed.end(), out.begin() + 12 * vocab, out.end());
  for (int32_t p = 9; p < 20; ++p) {
    batch.clear();
    batch.add_sequence(blocks_a);  // id 0 now
    batch.add_sequence(blocks_b);
    batch.add(a[p], p, 0, true);
    const int32_t pb = std::min<int32_t>(p + 3, 16);  // B decodes too (its last position repeated)
    batch.add(b[pb], pb, 1, true);
    out = mixed_forward.run(batch, cache);
    mixed.insert(mixed.end(), out.begin(), out.begin() + vocab);
  }
  ASSERT_EQ(mixed.size(), alone.size());
  EXPECT_EQ(std::memcmp(mixed.data(), alone.data(), alone.size() * sizeof(float)), 0);
}

TEST(GptOssRouterTest, TopKThenSoftmaxOverTheChosen) {
  const float logits[5] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  int32_t experts[3];
  float weights[3];
  route_token_topk_softmax(logits, 5, 3, experts, weights);
  EXPECT_EQ(experts[0], 1);  // a tie goes to the lower index
  EXPECT_EQ(experts[1], 3);
  EXPECT_EQ(experts[2], 4);
  const double total = 2.0 * std::exp(2.0) + std::exp(1.0);
  EXPECT_NEAR(weights[0], std::exp(2.0) / total, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(2.0) / total, 1e-6);
  EXPECT_NEAR(weights[2], std::exp(1.0) / total, 1e-6);
}

// swiglu_oai_row against the formula in double, over values on both sides of both clamps.
TEST(SwigluOaiTest, MatchesFormulaInDouble) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-12.0f, 12.0f);
  for (int64_t n : {1, 7, 64, 257}) {
    std::vector<float> gate(static_cast<size_t>(n)), up(static_cast<size_t>(n)), out(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) gate[i] = uniform(rng), up[i] = uniform(rng);
    swiglu_oai_row(gate.data(), up.data(), n, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const double expected = gpt_oss_reference::swiglu_oai(gate[i], up[i]);
      ASSERT_NEAR(out[i], expected, 1e-5 * std::max(1.0, std::fabs(expected))) << gate[i] << " " << up[i];
    }
  }
  // The clamps: a gate past the limit acts as the limit; an up past it as +-limit.
  const float gate[3] = {20.0f, 7.0f, -3.0f}, up[3] = {-50.0f, 9.0f, 0.5f};
  float out[3];
  swiglu_oai_row(gate, up, 3, out);
  EXPECT_FLOAT_EQ(out[0], static_cast<float>(gpt_oss_reference::swiglu_oai(7.0, -7.0)));
  EXPECT_FLOAT_EQ(out[1], static_cast<float>(gpt_oss_reference::swiglu_oai(7.0, 7.0)));
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

// A copy of `path` without tensor `dropped` (and without key `dropped_key`).
std::string copy_without(const std::string& path, const std::string& out, const std::string& dropped,
                         const std::string& dropped_key = "") {
  GgufFile file = GgufFile::open(path);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata())
    if (key != dropped_key) writer.set(key, value);
  for (const GgufTensorInfo& info : file.tensors()) {
    if (info.name == dropped) continue;
    const auto* bytes = static_cast<const uint8_t*>(info.view.data);
    std::vector<int64_t> shape(info.view.shape.begin(), info.view.shape.begin() + info.view.n_dims);
    writer.add_tensor(info.name, info.view.dtype, shape, std::vector<uint8_t>(bytes, bytes + info.view.n_bytes()));
  }
  writer.write(out);
  return out;
}

TEST_F(GptOssForwardTest, MalformedFilesAreOneLineErrors) {
  const std::string path = dir_.file("whole.gguf");
  test_support::write_random_model(gpt_oss_spec(), path);
  for (const char* tensor : {"blk.2.attn_sinks.weight", "blk.0.attn_output.bias", "blk.1.ffn_up_exps.bias",
                             "blk.1.ffn_gate_inp.bias", "blk.0.post_attention_norm.weight", "output.weight"}) {
    const std::string broken = copy_without(path, dir_.file(std::string("no_") + tensor), tensor);
    expect_one_line_error(broken, fmt::format("missing tensor '{}'", tensor));
  }
  expect_one_line_error(copy_without(path, dir_.file("no_window.gguf"), "", "gpt-oss.attention.sliding_window"),
                        "missing metadata key 'gpt-oss.attention.sliding_window'");
  expect_one_line_error(copy_without(path, dir_.file("no_expert_width.gguf"), "", "gpt-oss.expert_feed_forward_length"),
                        "missing metadata key 'gpt-oss.expert_feed_forward_length'");
  const std::string truncated = dir_.file("truncated.gguf");
  std::filesystem::copy_file(path, truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(path) - 1000);
  expect_one_line_error(truncated, "truncated");
}

}  // namespace
}  // namespace tandem
