// gpt-oss Hugging Face folders (GptOssForCausalLM, bf16-style layout) written here from the
// weights of a tests/support/random_model.h GGUF (held against a float64 reference in
// tests/model/gpt_oss_forward_test): HF's stacked, transposed experts (gate_up_proj
// [n_experts, d_model, 2 width] with gate and up in alternate columns, down_proj
// [n_experts, width, d_model]) and their biases, self_attn.sinks, mlp.router with bias,
// layer_types and YaRN rope_scaling. The folder loads to the GGUF's logits; `tandem convert`
// writes a GGUF with llama.cpp's gpt-oss keys and tensors that gives the folder's logits;
// gate and up swapped in the interleave is another model; MXFP4 checkpoints are one-line errors.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "hf/hf_model_writer.h"
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

// The GGUF-layout weights as an HF gpt-oss folder (F32 tensors). swap_gate_up: gate in the odd
// columns and up in the even ones (the wrong interleave).
void write_gpt_oss_folder(const RandomModelSpec& s, const RandomWeights& w, const std::string& dir,
                          bool swap_gate_up = false, const nlohmann::ordered_json& extra_config = {}) {
  const int64_t d = s.d_model, width = s.d_ff_expert, n = s.n_experts;
  nlohmann::ordered_json layer_types = nlohmann::ordered_json::array();
  for (int64_t l = 0; l < s.n_layers; ++l) layer_types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
  nlohmann::ordered_json config = {{"model_type", "gpt_oss"},
                                   {"architectures", {"GptOssForCausalLM"}},
                                   {"hidden_size", d},
                                   {"num_hidden_layers", s.n_layers},
                                   {"num_attention_heads", s.n_heads},
                                   {"num_key_value_heads", s.n_kv_heads},
                                   {"head_dim", s.head_dim()},
                                   {"intermediate_size", width},
                                   {"num_local_experts", n},
                                   {"num_experts_per_tok", s.n_experts_used},
                                   {"sliding_window", s.sliding_window},
                                   {"layer_types", layer_types},
                                   {"vocab_size", s.vocab_size},
                                   {"max_position_embeddings", s.context_length},
                                   {"rms_norm_eps", s.rms_norm_eps},
                                   {"rope_theta", s.rope_freq_base},
                                   {"rope_scaling",
                                    {{"rope_type", "yarn"},
                                     {"factor", s.yarn_factor},
                                     {"original_max_position_embeddings", s.yarn_original},
                                     {"beta_fast", 32.0},
                                     {"beta_slow", 1.0}}},
                                   {"swiglu_limit", 7.0},
                                   {"tie_word_embeddings", false}};
  if (extra_config.is_object())
    for (auto it = extra_config.begin(); it != extra_config.end(); ++it) config[it.key()] = it.value();
  write_text(dir + "/config.json", config.dump(2));
  write_text(dir + "/tokenizer.json", tiny_tokenizer_json());

  std::deque<std::vector<float>> values;  // alive until written
  std::vector<NamedTensor> tensors;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, std::vector<float> data) {
    values.push_back(std::move(data));
    tensors.push_back({name, std::move(shape), &values.back()});
  };
  add("model.embed_tokens.weight", {s.vocab_size, d}, w.token_embedding.values);
  add("model.norm.weight", {d}, w.output_norm);
  add("lm_head.weight", {s.vocab_size, d}, w.output.values);
  for (int64_t l = 0; l < s.n_layers; ++l) {
    const RandomLayer& layer = w.layers[static_cast<size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {d}, layer.attn_norm);
    add(p + "post_attention_layernorm.weight", {d}, layer.ffn_norm);
    add(p + "self_attn.q_proj.weight", {layer.wq.rows, d}, layer.wq.values);
    add(p + "self_attn.q_proj.bias", {layer.wq.rows}, layer.bq);
    add(p + "self_attn.k_proj.weight", {layer.wk.rows, d}, layer.wk.values);
    add(p + "self_attn.k_proj.bias", {layer.wk.rows}, layer.bk);
    add(p + "self_attn.v_proj.weight", {layer.wv.rows, d}, layer.wv.values);
    add(p + "self_attn.v_proj.bias", {layer.wv.rows}, layer.bv);
    add(p + "self_attn.o_proj.weight", {d, layer.wo.cols}, layer.wo.values);
    add(p + "self_attn.o_proj.bias", {d}, layer.bo);
    add(p + "self_attn.sinks", {s.n_heads}, layer.sinks);
    add(p + "mlp.router.weight", {n, d}, layer.router.values);
    add(p + "mlp.router.bias", {n}, layer.router_bias);
    // [n, d, 2 width]: element (e, k, 2j) = gate_e[j][k], (e, k, 2j + 1) = up_e[j][k].
    std::vector<float> gate_up(static_cast<size_t>(n * d * 2 * width)),
        gate_up_bias(static_cast<size_t>(n * 2 * width));
    std::vector<float> down(static_cast<size_t>(n * width * d)), down_bias(static_cast<size_t>(n * d));
    const int gate_column = swap_gate_up ? 1 : 0;
    for (int64_t e = 0; e < n; ++e) {
      const auto ex = static_cast<size_t>(e);
      for (int64_t j = 0; j < width; ++j) {
        for (int64_t k = 0; k < d; ++k) {
          gate_up[(e * d + k) * 2 * width + 2 * j + gate_column] = layer.expert_gate[ex].at(j, k);
          gate_up[(e * d + k) * 2 * width + 2 * j + 1 - gate_column] = layer.expert_up[ex].at(j, k);
          down[(e * width + j) * d + k] = layer.expert_down[ex].at(k, j);
        }
        gate_up_bias[e * 2 * width + 2 * j + gate_column] = layer.expert_gate_bias[ex][j];
        gate_up_bias[e * 2 * width + 2 * j + 1 - gate_column] = layer.expert_up_bias[ex][j];
      }
      for (int64_t k = 0; k < d; ++k) down_bias[e * d + k] = layer.expert_down_bias[ex][k];
    }
    add(p + "mlp.experts.gate_up_proj", {n, d, 2 * width}, std::move(gate_up));
    add(p + "mlp.experts.gate_up_proj_bias", {n, 2 * width}, std::move(gate_up_bias));
    add(p + "mlp.experts.down_proj", {n, width, d}, std::move(down));
    add(p + "mlp.experts.down_proj_bias", {n, d}, std::move(down_bias));
  }
  write_bytes(dir + "/model.safetensors", safetensors_bytes(tensors, DType::F32, false));
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
  write_gpt_oss_folder(spec, weights, dir, /*swap_gate_up=*/true);
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

// The released checkpoints' MXFP4 experts (quantization_config mxfp4, *_blocks / *_scales) are
// refused by name; a config without the window is an error too.
TEST(HfGptOss, UnsupportedCheckpointsAreOneLineErrors) {
  TempDir tmp;
  const RandomModelSpec spec = gguf_spec();
  const RandomWeights weights = write_random_model(spec, tmp.file("model.gguf"));
  const std::string mxfp4 = make_dir(tmp.file("mxfp4"));
  write_gpt_oss_folder(spec, weights, mxfp4, false,
                       {{"quantization_config", {{"quant_method", "mxfp4"}, {"modules_to_not_convert", {}}}}});
  expect_one_line_error(mxfp4, "quantized gpt-oss checkpoints (MXFP4");
  const std::string no_window = make_dir(tmp.file("no_window"));
  write_gpt_oss_folder(spec, weights, no_window, false, {{"sliding_window", nullptr}});
  expect_one_line_error(no_window, "config.json is missing 'sliding_window'");
  const std::string limit = make_dir(tmp.file("limit"));
  write_gpt_oss_folder(spec, weights, limit, false, {{"swiglu_limit", 5.0}});
  expect_one_line_error(limit, "swiglu_limit 5");
}

}  // namespace
}  // namespace tandem
