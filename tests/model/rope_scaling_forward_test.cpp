// RoPE scaling through the forward pass, against the float64 reference of rope_reference.h
// (frequencies and magnitudes from the definitions of linear interpolation, YaRN, LongRoPE and
// Llama 3): random llama GGUFs carrying llama.cpp's rope.scaling.* keys (and LongRoPE's
// rope_factors_long/short.weight, Llama 3's rope_freqs.weight), prefill and token-by-token
// decode; each scaling's wrong variants (plain frequencies, no magnitude, the other LongRoPE
// factor set) as proof the comparison can fail; LongRoPE's choice by the run's context; and the
// one-line errors for an unknown type or inconsistent keys.
#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "model/rope_scaling.h"
#include "support/rope_reference.h"

namespace tandem {
namespace {

using namespace rope_test;
using test_support::TempDir;

struct ScalingCase {
  std::string name;
  Scaling scaling;
};

RandomModelSpec llama_spec() {
  RandomModelSpec spec;  // 4 heads of 16 over d_model 64, 2 KV heads
  spec.d_model = 64, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 40, spec.seed = 61;
  return spec;
}

// LongRoPE factors as Phi-3's look: long ones grow from 1 for the fastest pair, short ones near 1.
Scaling longrope(int64_t pairs, int64_t context, int64_t original) {
  Scaling s;
  s.type = "longrope", s.original = original;
  s.factor = static_cast<double>(context) / static_cast<double>(original);
  for (int64_t i = 0; i < pairs; ++i) {
    s.long_f.push_back(1.0f + 0.5f * static_cast<float>(i * i));
    s.short_f.push_back(1.0f + 0.05f * static_cast<float>(i));
  }
  return s;
}

std::vector<ScalingCase> cases() {
  Scaling linear;
  linear.type = "linear", linear.factor = 4.0, linear.original = 16;
  Scaling yarn;  // L = 8: pair 0 keeps its frequency, pairs 1.. are interpolated by s
  yarn.type = "yarn", yarn.factor = 4.0, yarn.original = 8;
  Scaling yarn_keys;  // every yarn_* key and attn_factor set, a ramp over pairs 1..5
  yarn_keys.type = "yarn", yarn_keys.factor = 8.0, yarn_keys.original = 512, yarn_keys.beta_fast = 16.0;
  yarn_keys.beta_slow = 2.0, yarn_keys.ext_factor = 0.75, yarn_keys.attn_factor = 1.1;
  // gpt-oss's "truncate": false: the ramp runs over pairs 1.41..3.22 instead of 1..4.
  Scaling yarn_untruncated = yarn_keys;
  yarn_untruncated.truncate = false;
  Scaling llama3;
  llama3.type = "llama3", llama3.factor = 8.0, llama3.original = 32;
  return {{"linear", linear},
          {"yarn", yarn},
          {"yarn_keys", yarn_keys},
          {"yarn_untruncated", yarn_untruncated},
          {"longrope", longrope(8, 64, 16)},
          {"llama3", llama3}};
}

// The spec's model at `path` with the scaling's keys and tensors, as llama.cpp names them.
RandomWeights write_scaled(const RandomModelSpec& spec, const Scaling& s, const std::string& path) {
  RandomWeights weights = test_support::write_random_model(spec, path);
  const std::string p = spec.architecture + ".rope.scaling.";
  std::map<std::string, GgufValue> keys;
  std::map<std::string, std::vector<float>> tensors;
  auto f32 = [](double v) { return GgufValue::f32(static_cast<float>(v)); };
  if (s.type == "llama3") {
    // rope_freqs.weight holds each pair's divisor: theta_i / (the Llama 3 frequency).
    const std::vector<double> plain = frequencies(Scaling{}, spec.rotary_dims(), spec.rope_freq_base, 0);
    const std::vector<double> scaled = frequencies(s, spec.rotary_dims(), spec.rope_freq_base, 0);
    std::vector<float> divisors;
    for (size_t i = 0; i < plain.size(); ++i) divisors.push_back(static_cast<float>(plain[i] / scaled[i]));
    tensors["rope_freqs.weight"] = divisors;
  } else if (s.type != "none") {
    keys[p + "type"] = GgufValue::string(s.type);
    keys[p + "original_context_length"] = GgufValue::u32(static_cast<uint32_t>(s.original));
    if (s.type != "longrope") keys[p + "factor"] = f32(s.factor);
    if (s.attn_factor != 1.0) keys[p + "attn_factor"] = f32(s.attn_factor);
    if (s.type == "yarn" && s.beta_fast != 32.0) keys[p + "yarn_beta_fast"] = f32(s.beta_fast);
    if (s.type == "yarn" && s.beta_slow != 1.0) keys[p + "yarn_beta_slow"] = f32(s.beta_slow);
    if (s.type == "yarn" && s.ext_factor != 1.0) keys[p + "yarn_ext_factor"] = f32(s.ext_factor);
    if (s.type == "yarn" && !s.truncate) keys[p + "yarn_truncate"] = GgufValue::boolean(false);
    if (s.type == "longrope") {  // the converter's magnitude; the reference derives its own
      keys[p + "attn_factor"] = f32(std::sqrt(1.0 + std::log(s.factor) / std::log(static_cast<double>(s.original))));
      tensors["rope_factors_long.weight"] = s.long_f;
      tensors["rope_factors_short.weight"] = s.short_f;
    }
  }
  rewrite_gguf(path, keys, tensors, false);
  return weights;
}

class RopeScalingForwardTest : public ::testing::TestWithParam<ScalingCase> {
 protected:
  TempDir dir_;
  ThreadPool pool_{2};
};

// One prefill and a token-by-token decode of 24 tokens (past every original context but
// yarn_keys'), against the reference; every wrong variant of this scaling is far off.
TEST_P(RopeScalingForwardTest, MatchesReferenceAndItsWrongVariantsDoNot) {
  const ScalingCase& c = GetParam();
  const RandomModelSpec spec = llama_spec();
  const std::string path = dir_.file(c.name + ".gguf");
  const RandomWeights weights = write_scaled(spec, c.scaling, path);
  const auto model = load_model(path);
  Forward forward(model, 32, pool_);
  const std::vector<int32_t> tokens = random_tokens(24, spec.vocab_size, 71);
  const std::vector<float> prefill = run_in_steps(forward, tokens, 24);
  const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
  EXPECT_EQ(prefill, decoded) << c.name << ": prefill and decode differ";

  const int64_t d = spec.rotary_dims(), context = spec.context_length;
  const double base = spec.rope_freq_base;
  auto reference = [&](Variant v) {
    return reference_logits(spec, weights, tokens, frequencies(c.scaling, d, base, context, v), magnitude(c.scaling, v),
                            false);
  };
  EXPECT_LE(worst_relative_error(prefill, reference({}), spec.vocab_size), 1e-4) << c.name;
  EXPECT_GT(worst_relative_error(prefill, reference({.plain_frequencies = true}), spec.vocab_size), 1e-2)
      << c.name << ": unscaled frequencies should be a different model";
  if (magnitude(c.scaling) != 1.0) {
    EXPECT_GT(worst_relative_error(prefill, reference({.no_magnitude = true}), spec.vocab_size), 1e-2)
        << c.name << ": no magnitude should be a different model";
  }
  if (!c.scaling.truncate) {
    EXPECT_GT(worst_relative_error(prefill, reference({.rounded_ramp = true}), spec.vocab_size), 1e-3)
        << c.name << ": the ramp's ends rounded to whole pairs should be a different model";
  }
  if (c.scaling.type == "longrope") {
    EXPECT_GT(worst_relative_error(prefill, reference({.short_for_long = true}), spec.vocab_size), 1e-2)
        << c.name << ": the short factors should be a different model";
  }
}

INSTANTIATE_TEST_SUITE_P(Scalings, RopeScalingForwardTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ScalingCase>& info) { return info.param.name; });

TEST(RopeScaling, LoadsTheKeysAsLlamaCppNamesThem) {
  TempDir dir;
  const RandomModelSpec spec = llama_spec();
  const std::vector<ScalingCase> all = cases();
  auto scaling_of = [&](const std::string& name) {
    return std::find_if(all.begin(), all.end(), [&](const ScalingCase& c) { return c.name == name; })->scaling;
  };
  write_scaled(spec, scaling_of("yarn_keys"), dir.file("yarn.gguf"));
  const RopeScaling yarn = load_model(dir.file("yarn.gguf"))->config.rope_scaling;
  EXPECT_EQ(yarn.type, RopeScalingType::Yarn);
  EXPECT_DOUBLE_EQ(yarn.factor, 8.0);
  EXPECT_EQ(yarn.original_context, 512);
  EXPECT_DOUBLE_EQ(yarn.yarn_beta_fast, 16.0);
  EXPECT_DOUBLE_EQ(yarn.yarn_beta_slow, 2.0);
  EXPECT_DOUBLE_EQ(yarn.yarn_ext_factor, 0.75);
  EXPECT_NEAR(yarn.attn_factor, 1.1, 1e-6);
  EXPECT_NEAR(yarn.magnitude(), 1.1 * (1.0 + 0.1 * std::log(8.0)), 1e-6);
  EXPECT_TRUE(yarn.yarn_truncate);
  write_scaled(spec, scaling_of("yarn_untruncated"), dir.file("untruncated.gguf"));
  EXPECT_FALSE(load_model(dir.file("untruncated.gguf"))->config.rope_scaling.yarn_truncate);

  const Scaling longrope_scaling = scaling_of("longrope");
  write_scaled(spec, longrope_scaling, dir.file("longrope.gguf"));
  const RopeScaling lr = load_model(dir.file("longrope.gguf"))->config.rope_scaling;
  EXPECT_EQ(lr.type, RopeScalingType::LongRope);
  EXPECT_DOUBLE_EQ(lr.factor, 4.0);  // context 64 over 16, as no factor key says otherwise
  EXPECT_EQ(lr.long_factors, longrope_scaling.long_f);
  EXPECT_EQ(lr.short_factors, longrope_scaling.short_f);

  // A file without scaling keys, and one with the default type and no factor: no scaling.
  test_support::write_random_model(spec, dir.file("plain.gguf"));
  EXPECT_EQ(load_model(dir.file("plain.gguf"))->config.rope_scaling.type, RopeScalingType::None);
  rewrite_gguf(dir.file("plain.gguf"), {{"llama.rope.scaling.type", GgufValue::string("linear")}}, {}, false);
  EXPECT_EQ(load_model(dir.file("plain.gguf"))->config.rope_scaling.type, RopeScalingType::None);
}

// llama.cpp takes LongRoPE's long factors when the context (n_ctx per sequence) exceeds the
// original; so does Forward's context argument, and the engine passes its --ctx.
TEST(RopeScaling, LongRopeChoosesItsFactorsByTheRunsContext) {
  TempDir dir;
  ThreadPool pool(2);
  const RandomModelSpec spec = llama_spec();
  const Scaling s = longrope(8, 64, 16);
  const RandomWeights weights = write_scaled(spec, s, dir.file("m.gguf"));
  const auto model = load_model(dir.file("m.gguf"));
  const std::vector<int32_t> tokens = random_tokens(12, spec.vocab_size, 72);
  for (int64_t context : {int64_t{12}, int64_t{16}, int64_t{17}, int64_t{0}}) {
    Forward forward(model, 16, pool, context);
    const std::vector<float> logits = run_in_steps(forward, tokens, 12);
    const int64_t effective = context > 0 ? context : spec.context_length;
    const std::vector<double> expected = reference_logits(
        spec, weights, tokens, frequencies(s, spec.rotary_dims(), spec.rope_freq_base, effective), magnitude(s), false);
    EXPECT_LE(worst_relative_error(logits, expected, spec.vocab_size), 1e-4) << "context " << context;
  }
}

TEST(RopeScaling, BadKeysAreOneLineErrors) {
  TempDir dir;
  const RandomModelSpec spec = llama_spec();
  auto load_error = [&](const std::map<std::string, GgufValue>& keys,
                        const std::map<std::string, std::vector<float>>& tensors) -> std::string {
    const std::string path = dir.file("bad.gguf");
    test_support::write_random_model(spec, path);
    rewrite_gguf(path, keys, tensors, false);
    try {
      load_model(path);
    } catch (const InputError& error) {
      return error.what();
    }
    return "";
  };
  const std::string unknown = load_error({{"llama.rope.scaling.type", GgufValue::string("dynamic")}}, {});
  EXPECT_NE(unknown.find("unsupported RoPE scaling type 'dynamic'"), std::string::npos) << unknown;
  EXPECT_EQ(unknown.find('\n'), std::string::npos);
  EXPECT_NE(
      load_error({{"llama.rope.scaling.type", GgufValue::string("longrope")}}, {}).find("without rope_factors_long"),
      std::string::npos);
  EXPECT_NE(load_error({}, {{"rope_factors_long.weight", std::vector<float>(8, 2.0f)},
                            {"rope_factors_short.weight", std::vector<float>(7, 1.0f)}})
                .find("'rope_factors_short.weight' has shape [7], expected [8]"),
            std::string::npos);
  EXPECT_NE(load_error({{"llama.rope.scaling.type", GgufValue::string("yarn")}},
                       {{"rope_factors_long.weight", std::vector<float>(8, 2.0f)},
                        {"rope_factors_short.weight", std::vector<float>(8, 1.0f)}})
                .find("in a model whose RoPE scaling is 'yarn'"),
            std::string::npos);
  EXPECT_NE(load_error({{"llama.rope.scaling.type", GgufValue::string("yarn")},
                        {"llama.rope.scaling.factor", GgufValue::f32(-2.0f)}},
                       {})
                .find("RoPE scaling factor -2 is out of range"),
            std::string::npos);
  EXPECT_NE(load_error({{"llama.rope.scaling.type", GgufValue::string("yarn")},
                        {"llama.rope.scaling.factor", GgufValue::f32(4.0f)},
                        {"llama.rope.scaling.yarn_truncate", GgufValue::string("no")}},
                       {})
                .find("yarn_truncate must be a boolean"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
