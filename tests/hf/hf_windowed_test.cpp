// Hugging Face folders of the windowed families, written here: a Gemma3ForCausalLM text model
// (model_type gemma3_text: norms stored as w and used as 1 + w, pre/post-feedforward norms,
// layer_types), a Gemma2ForCausalLM (no Q/K norms, even layers local, attention and final
// soft-caps) and a Mistral with sliding_window. Each is the same model as a GGUF written by
// tests/support (gemma3's norms there hold 1 + w, as llama.cpp's converter stores them): loading
// the folder and loading the GGUF give the same logits bit for bit, past the window, and so
// does the GGUF `tandem convert` writes from the folder, whose window keys llama.cpp reads.
// Gemma 3's linear rope_scaling turns the global layers only, as llama.cpp's gemma3 does.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hf/hf_model_writer.h"
#include "hf/hf_test_support.h"
#include "io/gguf_file.h"
#include "model/rope_scaling.h"

namespace tandem {
namespace {

using namespace test_support;

std::vector<int32_t> prompt_of(int64_t n, int64_t vocab) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
  return tokens;
}

// HF's Gemma norm weight for a GGUF-layout value g = 1 + w: exact in float for g in [0.5, 2].
std::vector<float> minus_one(const std::vector<float>& values) {
  std::vector<float> out(values);
  for (float& v : out) v -= 1.0f;
  return out;
}

// Writes `g` (written as GGUF by write_random_model(s)) as a gemma3_text folder, or for a
// gemma2 spec as a Gemma2ForCausalLM folder (no Q/K norms, no layer_types: even layers local).
void write_gemma3_folder(const RandomModelSpec& s, const RandomWeights& g, const std::string& dir) {
  const bool gemma2 = s.architecture == "gemma2";
  nlohmann::ordered_json layer_types = nlohmann::ordered_json::array();
  for (int64_t l = 0; l < s.n_layers; ++l)
    layer_types.push_back(s.window_pattern == 0 || (l + 1) % s.window_pattern != 0 ? "sliding_attention"
                                                                                   : "full_attention");
  nlohmann::ordered_json config = {{"model_type", gemma2 ? "gemma2" : "gemma3_text"},
                                   {"architectures", {gemma2 ? "Gemma2ForCausalLM" : "Gemma3ForCausalLM"}},
                                   {"hidden_size", s.d_model},
                                   {"num_hidden_layers", s.n_layers},
                                   {"num_attention_heads", s.n_heads},
                                   {"num_key_value_heads", s.n_kv_heads},
                                   {"head_dim", s.head_dim()},
                                   {"intermediate_size", s.d_ff},
                                   {"rms_norm_eps", s.rms_norm_eps},
                                   {"rope_theta", s.rope_freq_base},
                                   {"rope_local_base_freq", s.rope_freq_base_local},
                                   {"sliding_window", s.sliding_window},
                                   {"layer_types", layer_types},
                                   {"query_pre_attn_scalar", s.head_dim()},
                                   {"final_logit_softcapping", nullptr},
                                   {"attn_logit_softcapping", nullptr},
                                   {"hidden_activation", "gelu_pytorch_tanh"},
                                   {"max_position_embeddings", s.context_length},
                                   {"vocab_size", s.vocab_size},
                                   {"rope_scaling", nullptr},
                                   {"bos_token_id", 4},
                                   {"eos_token_id", 6}};  // tie_word_embeddings left to its default, true
  if (gemma2) {
    config.erase("layer_types");
    config.erase("rope_local_base_freq");
    config["attn_logit_softcapping"] = s.attn_logit_softcap;
    config["final_logit_softcapping"] = s.final_logit_softcap;
  }
  write_text(dir + "/config.json", config.dump(2));
  write_text(dir + "/tokenizer.json", tiny_tokenizer_json());
  std::vector<std::vector<float>> norms;  // the HF values, alive until written
  norms.reserve(1 + 6 * g.layers.size());
  std::vector<NamedTensor> tensors;
  auto mat = [&](const std::string& name, const RandomMatrix& m) {
    tensors.push_back({name, {m.rows, m.cols}, &m.values});
  };
  auto norm = [&](const std::string& name, const std::vector<float>& gguf_values) {
    norms.push_back(minus_one(gguf_values));
    tensors.push_back({name, {static_cast<int64_t>(gguf_values.size())}, &norms.back()});
  };
  mat("model.embed_tokens.weight", g.token_embedding);
  for (size_t l = 0; l < g.layers.size(); ++l) {
    const RandomLayer& layer = g.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    norm(p + "input_layernorm.weight", layer.attn_norm);
    mat(p + "self_attn.q_proj.weight", layer.wq);  // half-split rows in both formats
    mat(p + "self_attn.k_proj.weight", layer.wk);
    mat(p + "self_attn.v_proj.weight", layer.wv);
    mat(p + "self_attn.o_proj.weight", layer.wo);
    if (!gemma2) {
      norm(p + "self_attn.q_norm.weight", layer.q_norm);
      norm(p + "self_attn.k_norm.weight", layer.k_norm);
    }
    norm(p + "post_attention_layernorm.weight", layer.post_attn_norm);
    norm(p + "pre_feedforward_layernorm.weight", layer.ffn_norm);
    norm(p + "post_feedforward_layernorm.weight", layer.post_ffn_norm);
    mat(p + "mlp.gate_proj.weight", layer.w_gate);
    mat(p + "mlp.up_proj.weight", layer.w_up);
    mat(p + "mlp.down_proj.weight", layer.w_down);
  }
  norm("model.norm.weight", g.output_norm);
  write_bytes(dir + "/model.safetensors", safetensors_bytes(tensors, DType::F32, false));
}

RandomModelSpec gemma3_spec() {
  RandomModelSpec s;
  s.architecture = "gemma3", s.d_model = 48, s.n_heads = 3, s.n_kv_heads = 1, s.head_size = 20, s.n_layers = 3;
  s.sliding_window = 5, s.window_pattern = 3, s.tied_output = true, s.rope_freq_base = 1000000.0f;
  s.rms_norm_eps = 1e-6f, s.context_length = 64, s.seed = 201;
  return s;
}

TEST(HfWindowed, Gemma3FolderEqualsItsGguf) {
  TempDir tmp;
  const RandomModelSpec s = gemma3_spec();
  const RandomWeights g = write_random_model(s, tmp.file("model.gguf"));
  const std::string dir = make_dir(tmp.file("hf"));
  write_gemma3_folder(s, g, dir);
  const auto from_hf = load_model(dir);
  EXPECT_EQ(from_hf->config.local_layers, (std::vector<uint8_t>{1, 1, 0}));
  EXPECT_EQ(from_hf->config.rope_freq_base_local, 10000.0f);
  const std::vector<int32_t> prompt = prompt_of(24, s.vocab_size);
  const std::vector<float> gguf_logits = prefill_logits(load_model(tmp.file("model.gguf")), prompt);
  EXPECT_EQ(prefill_logits(from_hf, prompt), gguf_logits);

  // Converted by the real binary: llama.cpp's keys and tensor names, the same logits.
  const testing::CommandResult result = tandem_convert(dir, tmp.file("converted.gguf"), "F32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const GgufFile file = GgufFile::open(tmp.file("converted.gguf"));
  EXPECT_EQ(file.get_string("general.architecture"), "gemma3");
  EXPECT_EQ(file.get_int("gemma3.attention.sliding_window"), 5);
  EXPECT_EQ(file.get_int("gemma3.attention.sliding_window_pattern"), 3);
  EXPECT_EQ(file.get_float("gemma3.rope.freq_base_swa"), 10000.0);
  EXPECT_NE(file.find_tensor("blk.1.post_ffw_norm.weight"), nullptr);
  EXPECT_NE(file.find_tensor("blk.1.post_attention_norm.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr) << "the head stays tied";
  EXPECT_EQ(prefill_logits(load_model(tmp.file("converted.gguf")), prompt), gguf_logits);
}

TEST(HfWindowed, Gemma3RejectsWhatItCannotRun) {
  TempDir tmp;
  const RandomModelSpec s = gemma3_spec();
  const RandomWeights g = write_random_model(s, tmp.file("model.gguf"));
  const std::string dir = make_dir(tmp.file("hf"));
  write_gemma3_folder(s, g, dir);
  std::ifstream in(dir + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["hidden_activation"] = "relu";
  write_text(dir + "/config.json", config.dump());
  try {
    load_model(dir);
    ADD_FAILURE() << "loaded a gemma3 config with hidden_activation relu";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("hidden_activation 'relu'"), std::string::npos) << error.what();
  }
}

nlohmann::json read_config(const std::string& dir) {
  std::ifstream in(dir + "/config.json");
  return nlohmann::json::parse(in);
}

// Gemma 3 4B and up: rope_scaling {"rope_type": "linear", "factor": 8} on the global layers
// only. The folder with it equals the GGUF carrying gemma3.rope.scaling.type "linear" and
// .factor 8 (llama.cpp's converter's keys for it), and differs from the unscaled model; so do
// its conversion and the newer form of the same config, rope_parameters per layer type.
TEST(HfWindowed, Gemma3LinearRopeScalingEqualsItsGguf) {
  TempDir tmp;
  RandomModelSpec s = gemma3_spec();  // layer 2 global, 0 and 1 local
  const RandomWeights g = write_random_model(s, tmp.file("unscaled.gguf"));
  s.rope_scaling_type = "linear", s.rope_scaling_factor = 8.0f;
  write_random_model(s, tmp.file("scaled.gguf"));  // the same seed: the same weights
  const std::string dir = make_dir(tmp.file("hf"));
  write_gemma3_folder(s, g, dir);
  nlohmann::json config = read_config(dir);
  config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  write_text(dir + "/config.json", config.dump());

  const auto from_hf = load_model(dir);
  EXPECT_EQ(from_hf->config.rope_scaling.type, RopeScalingType::Linear);
  EXPECT_EQ(from_hf->config.rope_scaling.factor, 8.0);
  const std::vector<int32_t> prompt = prompt_of(24, s.vocab_size);
  const std::vector<float> scaled = prefill_logits(load_model(tmp.file("scaled.gguf")), prompt);
  EXPECT_EQ(prefill_logits(from_hf, prompt), scaled);
  EXPECT_NE(prefill_logits(load_model(tmp.file("unscaled.gguf")), prompt), scaled);

  const testing::CommandResult result = tandem_convert(dir, tmp.file("converted.gguf"), "F32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const GgufFile file = GgufFile::open(tmp.file("converted.gguf"));
  EXPECT_EQ(file.get_string("gemma3.rope.scaling.type"), "linear");
  EXPECT_EQ(file.get_float("gemma3.rope.scaling.factor"), 8.0);
  EXPECT_EQ(prefill_logits(load_model(tmp.file("converted.gguf")), prompt), scaled);

  config.erase("rope_scaling");
  config.erase("rope_theta");
  config.erase("rope_local_base_freq");
  config["rope_parameters"] = {
      {"full_attention", {{"rope_type", "linear"}, {"factor", 8.0}, {"rope_theta", s.rope_freq_base}}},
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", s.rope_freq_base_local}}}};
  write_text(dir + "/config.json", config.dump());
  EXPECT_EQ(prefill_logits(load_model(dir), prompt), scaled) << "rope_parameters per layer type";
}

// The scaling turns only the global layers: with every layer local (pattern 0) the scaled and
// unscaled models are the same, from the GGUF and from the folder.
TEST(HfWindowed, Gemma3RopeScalingLeavesLocalLayersUnscaled) {
  TempDir tmp;
  RandomModelSpec s = gemma3_spec();
  s.window_pattern = 0;
  const RandomWeights g = write_random_model(s, tmp.file("unscaled.gguf"));
  s.rope_scaling_type = "linear", s.rope_scaling_factor = 8.0f;
  write_random_model(s, tmp.file("scaled.gguf"));
  const std::string dir = make_dir(tmp.file("hf"));
  write_gemma3_folder(s, g, dir);
  nlohmann::json config = read_config(dir);
  config["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  write_text(dir + "/config.json", config.dump());

  const std::vector<int32_t> prompt = prompt_of(24, s.vocab_size);
  const std::vector<float> unscaled = prefill_logits(load_model(tmp.file("unscaled.gguf")), prompt);
  const auto scaled_gguf = load_model(tmp.file("scaled.gguf"));
  ASSERT_EQ(scaled_gguf->config.rope_scaling.type, RopeScalingType::Linear);
  EXPECT_EQ(prefill_logits(scaled_gguf, prompt), unscaled);
  EXPECT_EQ(prefill_logits(load_model(dir), prompt), unscaled);
}

// A scaling Gemma 3 does not use is a one-line error naming it, from a folder or a GGUF.
TEST(HfWindowed, Gemma3OtherRopeScalingIsAOneLineError) {
  TempDir tmp;
  RandomModelSpec s = gemma3_spec();
  const RandomWeights g = write_random_model(s, tmp.file("model.gguf"));
  const std::string dir = make_dir(tmp.file("hf"));
  write_gemma3_folder(s, g, dir);
  const nlohmann::json original = read_config(dir);
  auto expect_error = [&](const std::string& path, const std::string& needle) {
    try {
      load_model(path);
      ADD_FAILURE() << "loaded " << path << ", expected an error with " << needle;
    } catch (const InputError& error) {
      const std::string what = error.what();
      EXPECT_NE(what.find(needle), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  };
  auto with_config = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json config = original;
    config[key] = value;
    write_text(dir + "/config.json", config.dump());
    return dir;
  };
  expect_error(with_config("rope_scaling", {{"rope_type", "yarn"}, {"factor", 8.0}}),
               "rope_type 'yarn' is not supported for gemma3");
  expect_error(with_config("rope_scaling", {{"rope_type", "dynamic"}, {"factor", 8.0}}), "'dynamic'");
  expect_error(with_config("rope_parameters", {{"sliding_attention", {{"rope_type", "linear"}, {"factor", 2.0}}}}),
               "sliding_attention rope_type 'linear'");
  s.rope_scaling_type = "yarn";
  write_random_model(s, tmp.file("yarn.gguf"));
  expect_error(tmp.file("yarn.gguf"), "gemma3.rope.scaling.type 'yarn' is not supported for gemma3");
}

RandomModelSpec gemma2_spec() {
  RandomModelSpec s;
  s.architecture = "gemma2", s.d_model = 48, s.n_heads = 3, s.n_kv_heads = 1, s.head_size = 20, s.n_layers = 4;
  s.sliding_window = 5, s.tied_output = true, s.rms_norm_eps = 1e-6f, s.context_length = 64, s.seed = 202;
  s.attn_logit_softcap = 2.0f, s.final_logit_softcap = 3.0f;  // small enough to bend this model's scores
  return s;
}

TEST(HfWindowed, Gemma2FolderEqualsItsGguf) {
  TempDir tmp;
  const RandomModelSpec s = gemma2_spec();
  const RandomWeights g = write_random_model(s, tmp.file("model.gguf"));
  const std::string dir = make_dir(tmp.file("hf"));
  write_gemma3_folder(s, g, dir);
  const auto from_hf = load_model(dir);
  EXPECT_EQ(from_hf->config.architecture, "gemma2");
  EXPECT_EQ(from_hf->config.local_layers, (std::vector<uint8_t>{1, 0, 1, 0}));
  EXPECT_EQ(from_hf->config.attn_logit_softcap, 2.0f);
  EXPECT_EQ(from_hf->config.final_logit_softcap, 3.0f);
  EXPECT_FALSE(from_hf->config.qk_norm);
  const std::vector<int32_t> prompt = prompt_of(24, s.vocab_size);
  const std::vector<float> gguf_logits = prefill_logits(load_model(tmp.file("model.gguf")), prompt);
  EXPECT_EQ(prefill_logits(from_hf, prompt), gguf_logits);

  const testing::CommandResult result = tandem_convert(dir, tmp.file("converted.gguf"), "F32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const GgufFile file = GgufFile::open(tmp.file("converted.gguf"));
  EXPECT_EQ(file.get_string("general.architecture"), "gemma2");
  EXPECT_EQ(file.get_int("gemma2.attention.sliding_window"), 5);
  EXPECT_EQ(file.get_float("gemma2.attn_logit_softcapping"), 2.0);
  EXPECT_EQ(file.get_float("gemma2.final_logit_softcapping"), 3.0);
  EXPECT_EQ(file.find_tensor("blk.0.attn_q_norm.weight"), nullptr);
  EXPECT_NE(file.find_tensor("blk.3.post_ffw_norm.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr) << "the head stays tied";
  EXPECT_EQ(prefill_logits(load_model(tmp.file("converted.gguf")), prompt), gguf_logits);

  // A different attention cap in the folder is a different model.
  std::ifstream in(dir + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["attn_logit_softcapping"] = 50.0;
  write_text(dir + "/config.json", config.dump());
  EXPECT_NE(prefill_logits(load_model(dir), prompt), gguf_logits);
}

TEST(HfWindowed, Gemma2BadCapsAreOneLineErrors) {
  TempDir tmp;
  const RandomModelSpec s = gemma2_spec();
  const RandomWeights g = write_random_model(s, tmp.file("model.gguf"));
  const std::string dir = make_dir(tmp.file("hf"));
  write_gemma3_folder(s, g, dir);
  std::ifstream in(dir + "/config.json");
  const nlohmann::json original = nlohmann::json::parse(in);
  auto expect_error = [&](const char* key, const nlohmann::json& value, const std::string& needle, bool convert) {
    nlohmann::json config = original;
    config[key] = value;
    write_text(dir + "/config.json", config.dump());
    try {
      if (convert) {
        const testing::CommandResult result = tandem_convert(dir, tmp.file("bad.gguf"), "F32");
        EXPECT_NE(result.exit_code, 0);
        EXPECT_NE(result.err.find(needle), std::string::npos) << result.err;
        EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
        return;
      }
      load_model(dir);
      ADD_FAILURE() << "loaded a gemma2 config with " << key << " " << value.dump();
    } catch (const InputError& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
    }
  };
  expect_error("attn_logit_softcapping", -1.0, "attn_logit_softcapping -1 is out of range", false);
  expect_error("sliding_window", 0, "sliding_window 0 must be positive", false);
  // null: no cap, which runs (-m DIR) but has no GGUF key (llama.cpp would take 50).
  expect_error("attn_logit_softcapping", nullptr, "without attention or final logit soft-capping", true);
}

// A Mistral folder with sliding_window 6: the same logits as the GGUF carrying
// llama.attention.sliding_window 6, which differ from the window-less model's past the window.
TEST(HfWindowed, MistralSlidingWindowEqualsItsGguf) {
  TempDir tmp;
  RandomModelSpec gguf_spec;
  gguf_spec.d_model = 48, gguf_spec.n_heads = 4, gguf_spec.n_kv_heads = 2, gguf_spec.sliding_window = 6;
  const RandomWeights g = write_random_model(gguf_spec, tmp.file("model.gguf"));
  HfModelSpec spec;
  spec.model_type = "mistral";
  spec.d_model = 48, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = gguf_spec.d_ff;
  spec.vocab_size = gguf_spec.vocab_size, spec.rms_norm_eps = gguf_spec.rms_norm_eps;
  spec.rope_theta = gguf_spec.rope_freq_base, spec.context_length = gguf_spec.context_length;
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, hf_weights_from_gguf_layout(g, spec), dir);
  std::ifstream in(dir + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  const std::string windowless = make_dir(tmp.file("windowless"));
  write_hf_model(spec, hf_weights_from_gguf_layout(g, spec), windowless);
  config["sliding_window"] = 6;
  write_text(dir + "/config.json", config.dump());

  const std::vector<int32_t> prompt = prompt_of(20, gguf_spec.vocab_size);
  const auto from_hf = load_model(dir);
  EXPECT_EQ(from_hf->config.sliding_window, 6);
  const std::vector<float> gguf_logits = prefill_logits(load_model(tmp.file("model.gguf")), prompt);
  EXPECT_EQ(prefill_logits(from_hf, prompt), gguf_logits);
  EXPECT_NE(prefill_logits(load_model(windowless), prompt), gguf_logits);
  const testing::CommandResult result = tandem_convert(dir, tmp.file("converted.gguf"), "F32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(GgufFile::open(tmp.file("converted.gguf")).get_int("llama.attention.sliding_window"), 6);
  EXPECT_EQ(prefill_logits(load_model(tmp.file("converted.gguf")), prompt), gguf_logits);
}

}  // namespace
}  // namespace tandem
