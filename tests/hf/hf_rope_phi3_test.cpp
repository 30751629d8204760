// RoPE scaling and Phi-3 from Hugging Face folders: tiny random checkpoints written here
// (config.json rope_scaling linear / yarn / longrope, Phi-3's fused qkv_proj and gate_up_proj,
// partial_rotary_factor, top-level original_max_position_embeddings) load, convert with the real
// `tandem convert` to the GGUF layout llama.cpp reads (attn_qkv, gate+up ffn_up, rope.scaling.*
// keys, rope_factors_long/short.weight), and give the same logits and greedy ids both ways; the
// same Phi-3 weights written as a GGUF by the test writer give the folder's logits bit for bit;
// an unknown rope_scaling type is a one-line error naming it.
#include <gtest/gtest.h>

#include "hf/hf_model_writer.h"
#include "hf/hf_test_support.h"
#include "io/gguf_file.h"
#include "model/rope_scaling.h"
#include "support/rope_reference.h"

namespace tandem {
namespace {

using namespace test_support;
using nlohmann::ordered_json;

const std::vector<int32_t> kPrompt = {1, 5, 9, 2, 33, 60, 17, 4, 40, 11, 23, 8, 50, 3, 19, 27, 44, 6, 12, 30};

ordered_json longrope_json(int64_t pairs) {
  ordered_json long_factor = ordered_json::array(), short_factor = ordered_json::array();
  for (int64_t i = 0; i < pairs; ++i) {
    long_factor.push_back(1.0 + 0.7 * static_cast<double>(i * i));
    short_factor.push_back(1.0 + 0.03 * static_cast<double>(i));
  }
  return {{"type", "longrope"}, {"long_factor", long_factor}, {"short_factor", short_factor}};
}

// Phi-4-mini in small: 4 heads of 16 (GQA 2), RoPE on 12 of them, tied, LongRoPE from 16 to 64.
HfModelSpec phi4_spec() {
  HfModelSpec spec;
  spec.model_type = "phi3", spec.d_model = 64, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 40;
  spec.tied = true, spec.partial_rotary_factor = 0.75, spec.original_max_position_embeddings = 16;
  spec.rope_scaling_json = longrope_json(6);
  spec.seed = 91;
  return spec;
}

struct ScaledCase {
  std::string name;
  HfModelSpec spec;
  std::string type;
  RopeScalingType scaling;
};

std::vector<ScaledCase> cases() {
  HfModelSpec linear;
  linear.rope_scaling_json = {{"rope_type", "linear"}, {"factor", 4.0}};
  HfModelSpec yarn;  // Qwen3-style: factor 4 over an original context of 16
  yarn.model_type = "qwen3", yarn.head_size = 16, yarn.seed = 92;
  yarn.rope_scaling_json = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 16}};
  HfModelSpec yarn_keys;  // every YaRN value of HF's set
  yarn_keys.rope_scaling_json = {{"type", "yarn"},    {"factor", 8.0},    {"original_max_position_embeddings", 32},
                                 {"beta_fast", 16.0}, {"beta_slow", 2.0}, {"attention_factor", 1.2}};
  HfModelSpec llama_longrope;  // LongRoPE on a llama, its original context inside rope_scaling
  llama_longrope.rope_scaling_json = longrope_json(6);
  llama_longrope.rope_scaling_json["original_max_position_embeddings"] = 16;
  HfModelSpec phi3_mini;  // Phi-3-mini's layout: MHA, whole-head RoPE, untied, no scaling
  phi3_mini.model_type = "phi3", phi3_mini.n_kv_heads = 4, phi3_mini.seed = 93;
  HfModelSpec phi4_bf16 = phi4_spec();
  phi4_bf16.dtype = DType::BF16;
  return {{"llama_linear", linear, "F32", RopeScalingType::Linear},
          {"qwen3_yarn", yarn, "F32", RopeScalingType::Yarn},
          {"llama_yarn_all_keys", yarn_keys, "F32", RopeScalingType::Yarn},
          {"llama_longrope", llama_longrope, "F32", RopeScalingType::LongRope},
          {"phi3_mini", phi3_mini, "F32", RopeScalingType::None},
          {"phi4_mini_longrope_partial", phi4_spec(), "F32", RopeScalingType::LongRope},
          {"phi4_mini_bf16", phi4_bf16, "BF16", RopeScalingType::LongRope}};
}

class HfScaledConvertTest : public ::testing::TestWithParam<ScaledCase> {};

TEST_P(HfScaledConvertTest, ConvertedGgufMatchesTheFolder) {
  const ScaledCase& c = GetParam();
  TempDir tmp;
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(c.spec, random_hf_weights(c.spec), dir);
  const std::string gguf = tmp.file("model.gguf");
  const ::tandem::testing::CommandResult result = tandem_convert(dir, gguf, c.type);
  ASSERT_EQ(result.exit_code, 0) << result.err;

  const auto hf = load_model(dir);
  const auto converted = load_model(gguf);
  const RopeScaling& a = hf->config.rope_scaling;
  const RopeScaling& b = converted->config.rope_scaling;
  EXPECT_EQ(a.type, c.scaling) << c.name;
  EXPECT_EQ(b.type, a.type) << c.name;
  EXPECT_EQ(b.factor, a.factor) << c.name;
  EXPECT_EQ(b.original_context, a.original_context) << c.name;
  EXPECT_EQ(b.magnitude(), a.magnitude()) << c.name;
  EXPECT_EQ(b.yarn_beta_fast, a.yarn_beta_fast) << c.name;
  EXPECT_EQ(b.yarn_beta_slow, a.yarn_beta_slow) << c.name;
  EXPECT_EQ(b.long_factors, a.long_factors) << c.name;
  EXPECT_EQ(b.short_factors, a.short_factors) << c.name;
  EXPECT_EQ(converted->config.rope_dims, hf->config.rope_dims) << c.name;
  EXPECT_EQ(converted->config.architecture, hf->config.architecture) << c.name;
  expect_all_close(prefill_logits(hf, kPrompt), prefill_logits(converted, kPrompt), 1e-5, c.name);
  EXPECT_EQ(greedy_ids(hf, kPrompt, 12), greedy_ids(converted, kPrompt, 12)) << c.name;
}

INSTANTIATE_TEST_SUITE_P(Models, HfScaledConvertTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ScaledCase>& info) { return info.param.name; });

// What each HF value becomes: s, L, magnitudes and the YaRN set as HF defines them.
TEST(HfRopeScaling, ReadsHfValues) {
  TempDir tmp;
  const std::vector<ScaledCase> all = cases();
  auto scaling_of = [&](const HfModelSpec& spec) {
    const std::string dir = make_dir(tmp.file("m" + std::to_string(spec.seed) + spec.model_type));
    write_hf_model(spec, random_hf_weights(spec), dir);
    return load_model(dir)->config;
  };
  const ModelConfig yarn = scaling_of(all[2].spec);
  EXPECT_EQ(yarn.rope_scaling.factor, 8.0);
  EXPECT_EQ(yarn.rope_scaling.original_context, 32);
  EXPECT_EQ(yarn.rope_scaling.yarn_beta_fast, 16.0);
  EXPECT_EQ(yarn.rope_scaling.yarn_beta_slow, 2.0);
  EXPECT_EQ(yarn.rope_scaling.magnitude(), 1.2f);  // attention_factor replaces 0.1 ln s + 1
  const ModelConfig phi4 = scaling_of(phi4_spec());
  EXPECT_EQ(phi4.rope_dims, 12);
  EXPECT_EQ(phi4.rope_scaling.original_context, 16);
  EXPECT_EQ(phi4.rope_scaling.factor, 4.0);  // max_position_embeddings 64 / 16
  EXPECT_NEAR(phi4.rope_scaling.magnitude(), std::sqrt(1.0 + std::log(4.0) / std::log(16.0)), 1e-7);
  EXPECT_EQ(phi4.rope_scaling.long_factors.size(), 6u);
  EXPECT_FLOAT_EQ(phi4.rope_scaling.long_factors[2], 1.0f + 0.7f * 4);
}

// The converted file is laid out as llama.cpp's phi3 converter writes it.
TEST(HfRopeScaling, Phi3ConvertsToLlamaCppsLayout) {
  TempDir tmp;
  const HfModelSpec spec = phi4_spec();
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, random_hf_weights(spec), dir);
  const ::tandem::testing::CommandResult result = tandem_convert(dir, tmp.file("m.gguf"), "F16");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const GgufFile file = GgufFile::open(tmp.file("m.gguf"));
  EXPECT_EQ(file.get_string("general.architecture"), "phi3");
  EXPECT_EQ(file.get_int("phi3.rope.dimension_count"), 12);
  EXPECT_EQ(file.get_int("phi3.context_length"), 64);
  EXPECT_EQ(file.get_int("phi3.rope.scaling.original_context_length"), 16);
  EXPECT_NEAR(*file.get_float("phi3.rope.scaling.attn_factor"), std::sqrt(1.5), 1e-6);
  EXPECT_EQ(file.find_tensor("blk.0.attn_qkv.weight")->view.shape_string(), "[128, 64]");  // 64 + 2 x 32
  EXPECT_EQ(file.find_tensor("blk.0.ffn_up.weight")->view.shape_string(), "[80, 64]");
  EXPECT_EQ(file.find_tensor("blk.0.ffn_down.weight")->view.shape_string(), "[64, 40]");
  EXPECT_EQ(file.find_tensor("rope_factors_long.weight")->view.shape_string(), "[6]");
  EXPECT_EQ(file.find_tensor("rope_factors_short.weight")->view.shape_string(), "[6]");
  for (const char* absent :
       {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.ffn_gate.weight", "output.weight"})
    EXPECT_EQ(file.find_tensor(absent), nullptr) << absent;
}

// The same Phi-3 weights written as a GGUF (tests/support's writer, fused by rope_reference.h's
// rewriter, LongRoPE keys and factors as llama.cpp's converter writes them) and as an HF folder
// give the same logits, bit for bit: both keep the half-split rows and fuse nothing at run time.
TEST(HfRopeScaling, SamePhi3WrittenBothWaysGivesSameLogits) {
  TempDir tmp;
  RandomModelSpec gguf_spec;
  gguf_spec.architecture = "phi3", gguf_spec.d_model = 64, gguf_spec.n_heads = 4, gguf_spec.n_kv_heads = 2;
  gguf_spec.d_ff = 40, gguf_spec.rope_dims = 12, gguf_spec.tied_output = true, gguf_spec.seed = 94;
  const RandomWeights g = write_random_model(gguf_spec, tmp.file("model.gguf"));
  HfModelSpec spec = phi4_spec();
  spec.vocab_size = gguf_spec.vocab_size, spec.rms_norm_eps = gguf_spec.rms_norm_eps;
  spec.rope_theta = gguf_spec.rope_freq_base, spec.context_length = gguf_spec.context_length;
  std::vector<float> long_factors, short_factors;
  for (const auto& value : spec.rope_scaling_json["long_factor"]) long_factors.push_back(value.get<float>());
  for (const auto& value : spec.rope_scaling_json["short_factor"]) short_factors.push_back(value.get<float>());
  rope_test::rewrite_gguf(tmp.file("model.gguf"),
                          {{"phi3.rope.scaling.original_context_length", GgufValue::u32(16)},
                           {"phi3.rope.scaling.attn_factor",
                            GgufValue::f32(static_cast<float>(std::sqrt(1.0 + std::log(4.0) / std::log(16.0))))}},
                          {{"rope_factors_long.weight", long_factors}, {"rope_factors_short.weight", short_factors}},
                          true);
  HfWeights w;
  w.embed = g.token_embedding, w.lm_head = g.output, w.norm = g.output_norm;
  for (const RandomLayer& gl : g.layers)
    w.layers.push_back(HfLayer{gl.attn_norm,
                               gl.ffn_norm,
                               {},
                               {},
                               {},
                               gl.wq,
                               gl.wk,
                               gl.wv,
                               gl.wo,
                               gl.w_gate,
                               gl.w_up,
                               gl.w_down,
                               {},
                               {},
                               {},
                               {},
                               {},
                               {}});
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, w, dir);
  const auto from_gguf = load_model(tmp.file("model.gguf"));
  ASSERT_EQ(from_gguf->config.rope_scaling.type, RopeScalingType::LongRope);
  EXPECT_EQ(prefill_logits(load_model(dir), kPrompt), prefill_logits(from_gguf, kPrompt));
}

TEST(HfRopeScaling, UnknownTypeIsAOneLineErrorNamingIt) {
  TempDir tmp;
  auto load_error = [&](const ordered_json& scaling, const std::string& name) -> std::string {
    HfModelSpec spec;
    spec.rope_scaling_json = scaling;
    const std::string dir = make_dir(tmp.file(name));
    write_hf_model(spec, random_hf_weights(spec), dir);
    try {
      load_model(dir);
    } catch (const InputError& error) {
      return error.what();
    }
    return "";
  };
  const std::string dynamic = load_error({{"rope_type", "dynamic"}, {"factor", 2.0}}, "dynamic");
  EXPECT_NE(dynamic.find("unsupported RoPE scaling type 'dynamic'"), std::string::npos) << dynamic;
  EXPECT_EQ(dynamic.find('\n'), std::string::npos);
  EXPECT_NE(load_error(longrope_json(6), "no_original").find("needs original_max_position_embeddings"),
            std::string::npos);
  EXPECT_NE(load_error({{"rope_type", "linear"}}, "no_factor").find("rope_scaling needs a number 'factor'"),
            std::string::npos);
  ordered_json short_list = longrope_json(5);
  short_list["original_max_position_embeddings"] = 16;
  EXPECT_NE(load_error(short_list, "short_list").find("LongRoPE needs 6 long and short factors"), std::string::npos);
}

}  // namespace
}  // namespace tandem
