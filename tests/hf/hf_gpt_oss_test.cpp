// gpt-oss Hugging Face folders (GptOssForCausalLM, bf16-style layout, hf/hf_gpt_oss_writer.h)
// written from the weights of a tests/support/random_model.h GGUF (held against a float64
// reference in tests/model/gpt_oss_forward_test). The folder loads to the GGUF's logits;
// `tandem convert` writes a GGUF with llama.cpp's gpt-oss keys and tensors that gives the
// folder's logits; gate and up swapped in the interleave is another model; a quantization other
// than mxfp4 is a one-line error (the MXFP4 layout: hf_gpt_oss_mxfp4_test).
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "hf/hf_gpt_oss_writer.h"
#include "hf/hf_test_support.h"
#include "io/gguf_file.h"

namespace tandem {
namespace {

using namespace test_support;

const std::vector<int32_t> kPrompt = {1, 5, 9, 2, 33, 60, 17, 4, 40, 11, 12, 50, 3, 8, 21, 30, 44, 7, 19, 2, 61};

RandomModelSpec gguf_spec() {
  RandomModelSpec s;
  s.architecture = "gpt-oss";
  s.d_model = 40, s.n_layers = 3, s.n_heads = 4, s.n_kv_heads = 2, s.head_size = 12;
  s.n_experts = 5, s.n_experts_used = 3, s.d_ff_expert = 37, s.d_ff = 37;
  s.sliding_window = 8, s.context_length = 64, s.rope_freq_base = 150000.0f;
  s.yarn_factor = 4.0, s.yarn_original = 16;
  s.seed = 93;
  return s;
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  return worst;
}

TEST(HfGptOss, FolderLoadsAsTheSameModelAsItsGguf) {
  TempDir tmp;
  const RandomModelSpec spec = gguf_spec();
  const std::string gguf = tmp.file("model.gguf");
  const RandomWeights weights = write_random_model(spec, gguf);
  const std::string dir = make_dir(tmp.file("hf"));
  write_gpt_oss_folder(spec, weights, dir);
  const auto from_hf = load_model(dir);
  const auto from_gguf = load_model(gguf);
  const ModelConfig& c = from_hf->config;
  EXPECT_EQ(c.architecture, "gpt-oss");
  EXPECT_TRUE(c.gpt_oss_experts);
  EXPECT_TRUE(c.attention_sinks);
  EXPECT_EQ(c.n_experts, 5);
  EXPECT_EQ(c.n_experts_used, 3);
  EXPECT_EQ(c.d_ff_expert, 37);
  EXPECT_EQ(c.layer_window(0), 8);
  EXPECT_EQ(c.layer_window(1), 0);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Yarn);
  EXPECT_EQ(c.rope_scaling.magnitude(), from_gguf->config.rope_scaling.magnitude());
  // 21 positions: the window of 8 passed in the local layers.
  expect_all_close(prefill_logits(from_hf, kPrompt), prefill_logits(from_gguf, kPrompt), 1e-5, "hf vs gguf");
}

TEST(HfGptOss, SwappedGateUpInterleaveIsAnotherModel) {
  TempDir tmp;
  const RandomModelSpec spec = gguf_spec();
  const std::string gguf = tmp.file("model.gguf");
  const RandomWeights weights = write_random_model(spec, gguf);
  const std::string dir = make_dir(tmp.file("hf"));
  write_gpt_oss_folder(spec, weights, dir, {.swap_gate_up = true});
  EXPECT_GT(worst_difference(prefill_logits(load_model(dir), kPrompt), prefill_logits(load_model(gguf), kPrompt)),
            1e-2);
}

// `tandem convert` F32: llama.cpp's gpt-oss keys and tensor names, experts stacked as
// [n_experts, rows, cols] and their biases as [n_experts, width]; the file's logits are the
// folder's.
TEST(HfGptOss, ConvertWritesLlamaCppsGptOss) {
  TempDir tmp;
  const RandomModelSpec spec = gguf_spec();
  const RandomWeights weights = write_random_model(spec, tmp.file("model.gguf"));
  const std::string dir = make_dir(tmp.file("hf"));
  write_gpt_oss_folder(spec, weights, dir);
  const std::string out = tmp.file("converted.gguf");
  const testing::CommandResult result = tandem_convert(dir, out, "F32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  {
    const GgufFile file = GgufFile::open(out);
    EXPECT_EQ(file.get_string("general.architecture"), "gpt-oss");
    EXPECT_EQ(file.get_int("gpt-oss.expert_count"), 5);
    EXPECT_EQ(file.get_int("gpt-oss.expert_used_count"), 3);
    EXPECT_EQ(file.get_int("gpt-oss.expert_feed_forward_length"), 37);
    EXPECT_EQ(file.get_int("gpt-oss.attention.sliding_window"), 8);
    EXPECT_EQ(file.get_string("gpt-oss.rope.scaling.type"), "yarn");
    const std::vector<std::pair<const char*, const char*>> shapes = {{"blk.1.attn_sinks.weight", "[4]"},
                                                                     {"blk.1.attn_output.bias", "[40]"},
                                                                     {"blk.1.ffn_gate_inp.bias", "[5]"},
                                                                     {"blk.1.ffn_gate_exps.bias", "[5, 37]"},
                                                                     {"blk.1.ffn_down_exps.bias", "[5, 40]"},
                                                                     {"blk.1.ffn_up_exps.weight", "[5, 37, 40]"},
                                                                     {"blk.1.ffn_down_exps.weight", "[5, 40, 37]"},
                                                                     {"blk.1.post_attention_norm.weight", "[40]"},
                                                                     {"output.weight", "[67, 40]"}};
    for (const auto& [name, shape] : shapes) {
      const GgufTensorInfo* info = file.find_tensor(name);
      ASSERT_NE(info, nullptr) << name;
      EXPECT_EQ(info->view.shape_string(), shape) << name;
    }
    EXPECT_EQ(file.find_tensor("blk.1.ffn_norm.weight"), nullptr);
    // Expert 3's up bias element 5 is the folder's odd column 11 of row 3.
    EXPECT_EQ(file.find_tensor("blk.1.ffn_up_exps.bias")->view.f32()[3 * 37 + 5],
              weights.layers[1].expert_up_bias[3][5]);
  }
  const std::vector<float> folder = prefill_logits(load_model(dir), kPrompt);
  expect_all_close(prefill_logits(load_model(out), kPrompt), folder, 1e-6, "converted vs folder");
}

// The released configs say "truncate": false (YaRN's ramp ends stay fractional instead of
// being rounded out to whole pairs): the folder loads with it, runs another model than the
// rounded one, and convert keeps it (rope.scaling.yarn_truncate), so the GGUF gives the folder's
// logits. Betas 4 and 0.25 put the ramp's upper end at pair 1.17 of 6 (rounded: 2), where the
// two differ; the writer's defaults (32, 1) land on whole pairs either way.
TEST(HfGptOss, TruncateFalseIsKeptThroughConvert) {
  TempDir tmp;
  const RandomModelSpec spec = gguf_spec();
  const RandomWeights weights = write_random_model(spec, tmp.file("model.gguf"));
  auto folder_with = [&](const char* name, bool truncate) {
    const std::string dir = make_dir(tmp.file(name));
    const nlohmann::ordered_json scaling = {
        {"rope_type", "yarn"}, {"factor", spec.yarn_factor}, {"original_max_position_embeddings", spec.yarn_original},
        {"beta_fast", 4.0},    {"beta_slow", 0.25},          {"truncate", truncate}};
    write_gpt_oss_folder(spec, weights, dir, {.extra_config = {{"rope_scaling", scaling}}});
    return dir;
  };
  const std::string rounded = folder_with("rounded", true), exact = folder_with("exact", false);
  const auto model = load_model(exact);
  EXPECT_FALSE(model->config.rope_scaling.yarn_truncate);
  EXPECT_TRUE(load_model(rounded)->config.rope_scaling.yarn_truncate);
  const std::vector<float> folder = prefill_logits(model, kPrompt);
  EXPECT_GT(worst_difference(folder, prefill_logits(load_model(rounded), kPrompt)), 1e-4);
  const std::string out = tmp.file("converted.gguf");
  const testing::CommandResult result = tandem_convert(exact, out, "F32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(GgufFile::open(out).get_bool("gpt-oss.rope.scaling.yarn_truncate"), std::optional<bool>(false));
  expect_all_close(prefill_logits(load_model(out), kPrompt), folder, 1e-6, "converted vs folder");
  // Anything but a boolean is refused.
  const std::string bad = make_dir(tmp.file("bad"));
  write_gpt_oss_folder(spec, weights, bad,
                       {.extra_config = {{"rope_scaling",
                                          {{"rope_type", "yarn"},
                                           {"factor", spec.yarn_factor},
                                           {"original_max_position_embeddings", spec.yarn_original},
                                           {"truncate", "no"}}}}});
  EXPECT_THROW(load_model(bad), InputError);
}

void expect_one_line_error(const std::string& dir, const std::string& needle) {
  try {
    load_model(dir);
    ADD_FAILURE() << "loaded " << dir;
  } catch (const InputError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_NE(what.find(dir), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// A quantization_config other than mxfp4 is refused by name (the MXFP4 layout's own errors are in
// hf_gpt_oss_mxfp4_test); a config without the window or with another swiglu_limit is an error too.
TEST(HfGptOss, UnsupportedCheckpointsAreOneLineErrors) {
  TempDir tmp;
  const RandomModelSpec spec = gguf_spec();
  const RandomWeights weights = write_random_model(spec, tmp.file("model.gguf"));
  const std::string quantized = make_dir(tmp.file("quantized"));
  write_gpt_oss_folder(spec, weights, quantized,
                       {.extra_config = {{"quantization_config", {{"quant_method", "bitsandbytes"}}}}});
  expect_one_line_error(quantized, "quantization_config 'bitsandbytes' is not supported");
  const std::string no_window = make_dir(tmp.file("no_window"));
  write_gpt_oss_folder(spec, weights, no_window, {.extra_config = {{"sliding_window", nullptr}}});
  expect_one_line_error(no_window, "config.json is missing 'sliding_window'");
  const std::string limit = make_dir(tmp.file("limit"));
  write_gpt_oss_folder(spec, weights, limit, {.extra_config = {{"swiglu_limit", 5.0}}});
  expect_one_line_error(limit, "swiglu_limit 5");
}

}  // namespace
}  // namespace tandem
