// Phi-3 through the forward pass, against the float64 reference of rope_reference.h written from
// the Phi-3 definition: Q, K, V from one fused attn_qkv (rows in that order) and gate, up from one
// fused ffn_up (gate rows first, silu(gate) x up), RoPE on half-split pairs of the first
// rope_dims elements (partial rotary, Phi-4-mini), LongRoPE factors and magnitude; GGUFs laid out
// as llama.cpp's converter writes them (no rope.scaling.type key: the factor tensors say it).
// The fused tensors load as views of their rows. Wrong variants (adjacent pairs, gate and up
// swapped, the other LongRoPE factors, no magnitude) prove the comparison can fail; prefill ==
// chunks == decode bit for bit; shape errors name the fused tensor.
#include <gtest/gtest.h>

#include <cstring>

#include "base/error.h"
#include "support/rope_reference.h"

namespace tandem {
namespace {

using namespace rope_test;
using test_support::TempDir;

struct Phi3Case {
  std::string name;
  RandomModelSpec spec;
  bool longrope = false;
};

std::vector<Phi3Case> cases() {
  RandomModelSpec mini;  // Phi-3-mini's layout in small: MHA, whole-head RoPE, untied, no scaling
  mini.architecture = "phi3", mini.d_model = 48, mini.n_heads = 3, mini.n_kv_heads = 3, mini.seed = 81;
  RandomModelSpec phi4;  // Phi-4-mini's: GQA, RoPE on 12 of 16, tied, LongRoPE 16 -> 64, F16
  phi4.architecture = "phi3", phi4.d_model = 64, phi4.n_heads = 4, phi4.n_kv_heads = 2, phi4.rope_dims = 12;
  phi4.tied_output = true, phi4.dtype = DType::F16, phi4.seed = 82;
  return {{"mini_mha", mini, false}, {"phi4_gqa_partial_longrope", phi4, true}};
}

Scaling phi3_longrope(const RandomModelSpec& spec) {
  Scaling s;
  s.type = "longrope", s.original = 16;
  s.factor = static_cast<double>(spec.context_length) / 16.0;
  for (int64_t i = 0; i < spec.rotary_dims() / 2; ++i) {
    s.long_f.push_back(1.0f + 0.6f * static_cast<float>(i * i));
    s.short_f.push_back(1.0f + 0.04f * static_cast<float>(i));
  }
  return s;
}

// The spec's model as a phi3 GGUF: fused tensors, and for LongRoPE the keys and tensors
// llama.cpp's Phi3MiniModel converter writes (original context, attn_factor, the two factor sets).
RandomWeights write_phi3(const Phi3Case& c, const std::string& path) {
  RandomWeights weights = test_support::write_random_model(c.spec, path);
  std::map<std::string, GgufValue> keys;
  std::map<std::string, std::vector<float>> tensors;
  if (c.longrope) {
    const Scaling s = phi3_longrope(c.spec);
    keys["phi3.rope.scaling.original_context_length"] = GgufValue::u32(static_cast<uint32_t>(s.original));
    keys["phi3.rope.scaling.attn_factor"] =
        GgufValue::f32(static_cast<float>(std::sqrt(1.0 + std::log(s.factor) / std::log(16.0))));
    tensors["rope_factors_long.weight"] = s.long_f;
    tensors["rope_factors_short.weight"] = s.short_f;
  }
  rewrite_gguf(path, keys, tensors, true);
  return weights;
}

class Phi3ForwardTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> load(const Phi3Case& c, RandomWeights& weights) {
    const std::string path = dir_.file(c.name + ".gguf");
    weights = write_phi3(c, path);
    return load_model(path);
  }
  TempDir dir_;
  ThreadPool pool_{2};
};

TEST_F(Phi3ForwardTest, FusedTensorsLoadAsTheirParts) {
  for (const Phi3Case& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    const ModelConfig& config = model->config;
    EXPECT_EQ(config.architecture, "phi3");
    EXPECT_EQ(config.rope_pairing, RopePairing::HalfSplit) << c.name;
    EXPECT_EQ(config.rope_dims, c.spec.rotary_dims()) << c.name;
    EXPECT_EQ(config.rope_scaling.type, c.longrope ? RopeScalingType::LongRope : RopeScalingType::None) << c.name;
    const LayerWeights& layer = model->weights.layers[1];
    EXPECT_EQ(layer.wq.shape_string(), fmt::format("[{}, {}]", c.spec.n_heads * c.spec.head_dim(), c.spec.d_model));
    EXPECT_EQ(layer.wk.shape_string(), fmt::format("[{}, {}]", c.spec.n_kv_heads * c.spec.head_dim(), c.spec.d_model));
    EXPECT_EQ(layer.wv.shape_string(), layer.wk.shape_string());
    EXPECT_EQ(layer.w_gate.shape_string(), fmt::format("[{}, {}]", c.spec.d_ff, c.spec.d_model)) << c.name;
    EXPECT_EQ(layer.w_up.shape_string(), layer.w_gate.shape_string());
    // Each part holds its own rows of the fused tensor (the last row of V, the first of up).
    std::vector<float> row(static_cast<size_t>(c.spec.d_model));
    auto first_element = [&](const TensorView& view, int64_t r) {
      dequantize_row(view.dtype, view.row(r), row.data(), c.spec.d_model);
      return row[0];
    };
    EXPECT_EQ(first_element(layer.wv, layer.wv.dim(0) - 1), weights.layers[1].wv.at(layer.wv.dim(0) - 1, 0));
    EXPECT_EQ(first_element(layer.w_up, 0), weights.layers[1].w_up.at(0, 0));
    // The fused rows count once in the bytes (no copy of a part is counted twice).
    const int64_t qkv_bytes = (c.spec.n_heads + 2 * c.spec.n_kv_heads) * c.spec.head_dim() * layer.wq.row_bytes();
    EXPECT_EQ(layer.wq.n_bytes() + layer.wk.n_bytes() + layer.wv.n_bytes(), qkv_bytes);
  }
}

// One prefill of 24 tokens (past LongRoPE's original 16), every row against the reference;
// the wrong variants on the same weights are far outside the tolerance.
TEST_F(Phi3ForwardTest, PrefillMatchesReference) {
  for (const Phi3Case& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    Forward forward(model, 32, pool_);
    const std::vector<int32_t> tokens = random_tokens(24, c.spec.vocab_size, 83);
    const std::vector<float> engine = run_in_steps(forward, tokens, 24);
    const Scaling s = c.longrope ? phi3_longrope(c.spec) : Scaling{};
    auto reference = [&](Variant v) {
      return reference_logits(c.spec, weights, tokens,
                              frequencies(s, c.spec.rotary_dims(), c.spec.rope_freq_base, c.spec.context_length, v),
                              magnitude(s, v), true, v);
    };
    const int64_t vocab = c.spec.vocab_size;
    EXPECT_LE(worst_relative_error(engine, reference({}), vocab), 1e-4) << c.name;
    EXPECT_GT(worst_relative_error(engine, reference({.adjacent_pairs = true}), vocab), 1e-2)
        << c.name << ": adjacent pairs should be a different model";
    EXPECT_GT(worst_relative_error(engine, reference({.swap_gate_up = true}), vocab), 1e-2)
        << c.name << ": gate and up swapped should be a different model";
    if (c.longrope) {
      EXPECT_GT(worst_relative_error(engine, reference({.short_for_long = true}), vocab), 1e-2)
          << c.name << ": the short factors should be a different model";
      EXPECT_GT(worst_relative_error(engine, reference({.no_magnitude = true}), vocab), 1e-2)
          << c.name << ": LongRoPE without its magnitude should be a different model";
      // A run whose context is within the original takes the short factors.
      Forward short_forward(model, 32, pool_, 16);
      const std::vector<float> short_engine = run_in_steps(short_forward, tokens, 24);
      EXPECT_LE(worst_relative_error(short_engine, reference({.short_for_long = true}), vocab), 1e-4) << c.name;
    }
  }
}

// Prefill in one batch == chunks of 7 == a token per call (decode), bit for bit.
TEST_F(Phi3ForwardTest, PrefillEqualsChunkedAndTokenByTokenDecode) {
  for (const Phi3Case& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    Forward forward(model, 32, pool_);
    const std::vector<int32_t> tokens = random_tokens(23, c.spec.vocab_size, 84);
    const std::vector<float> whole = run_in_steps(forward, tokens, 23);
    const std::vector<float> chunked = run_in_steps(forward, tokens, 7);
    const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
    ASSERT_EQ(whole.size(), decoded.size());
    ASSERT_EQ(whole.size(), chunked.size());
    EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0) << c.name;
    EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0) << c.name;
  }
}

TEST_F(Phi3ForwardTest, WrongFusedShapesNameTheTensor) {
  const Phi3Case c = cases()[0];
  const std::string path = dir_.file("unfused.gguf");
  // Separate gate and up (a llama layout under the phi3 name): ffn_up has half the rows.
  test_support::write_random_model(c.spec, path);
  try {
    load_model(path);
    ADD_FAILURE() << "an unfused ffn_up loaded";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("tensor 'blk.0.ffn_up.weight' has shape [37, 48], expected [74, 48]"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace tandem
