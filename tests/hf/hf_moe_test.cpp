// Mixture-of-experts Hugging Face folders (Qwen3MoeForCausalLM, MixtralForCausalLM) written by
// hf_model_writer.h: the same weights written as a GGUF by tests/support/random_model.h (stacked
// ffn_*_exps, the GGUF path held against a float64 reference in tests/model/moe_forward_test)
// and as an HF folder load to the same logits; `tandem convert` stacks the experts into a GGUF
// that gives the folder's logits and greedy ids with llama.cpp's keys and shapes; configs Tandem
// cannot run or write (dense layers, norm_topk_prob false for a GGUF) are one-line errors.
#include <gtest/gtest.h>

#include <cstring>

#include "base/error.h"
#include "base/quant.h"
#include "hf/hf_model_writer.h"
#include "hf/hf_test_support.h"
#include "io/gguf_file.h"

namespace tandem {
namespace {

using namespace test_support;

const std::vector<int32_t> kPrompt = {1, 5, 9, 2, 33, 60, 17, 4, 40, 11, 12, 50, 3};

struct MoePair {
  std::string name;
  RandomModelSpec gguf;  // tests/support/random_model.h
  HfModelSpec hf;        // the same model in HF's terms
};

std::vector<MoePair> pairs() {
  RandomModelSpec qwen;
  qwen.architecture = "qwen3moe", qwen.head_size = 16, qwen.n_heads = 4, qwen.n_kv_heads = 2, qwen.d_ff = 40;
  qwen.n_experts = 5, qwen.n_experts_used = 2, qwen.d_ff_expert = 27, qwen.tied_output = true, qwen.seed = 91;
  qwen.rope_freq_base = 1000000.0f, qwen.rms_norm_eps = 1e-6f;
  HfModelSpec qwen_hf;
  qwen_hf.model_type = "qwen3_moe", qwen_hf.head_size = 16, qwen_hf.n_heads = 4, qwen_hf.n_kv_heads = 2;
  qwen_hf.d_ff = 40, qwen_hf.n_experts = 5, qwen_hf.n_experts_used = 2, qwen_hf.moe_width = 27, qwen_hf.tied = true;
  qwen_hf.rope_theta = 1000000.0f, qwen_hf.rms_norm_eps = 1e-6f;
  RandomModelSpec mixtral;
  mixtral.n_heads = 4, mixtral.n_kv_heads = 2, mixtral.d_ff = 35, mixtral.n_experts = 3, mixtral.n_experts_used = 2;
  mixtral.seed = 92;
  HfModelSpec mixtral_hf;
  mixtral_hf.model_type = "mixtral", mixtral_hf.n_heads = 4, mixtral_hf.n_kv_heads = 2, mixtral_hf.d_ff = 35;
  mixtral_hf.n_experts = 3, mixtral_hf.n_experts_used = 2;
  for (HfModelSpec* hf : {&qwen_hf, &mixtral_hf}) hf->vocab_size = 67, hf->context_length = 64;
  return {{"qwen3moe", qwen, qwen_hf}, {"mixtral", mixtral, mixtral_hf}};
}

// The GGUF-layout weights written as a GGUF and, Q/K rows back to HF's half-split for the
// llama layout, as an HF folder: both load to the same model, logits equal to float rounding
// (the same kernels run the same values; only the packing of F32 matrices differs).
TEST(HfMoe, FolderLoadsAsTheSameModelAsItsGguf) {
  for (const MoePair& pair : pairs()) {
    TempDir tmp;
    const std::string gguf = tmp.file("model.gguf");
    const RandomWeights weights = write_random_model(pair.gguf, gguf);
    const std::string dir = make_dir(tmp.file("hf"));
    write_hf_model(pair.hf, hf_weights_from_gguf_layout(weights, pair.hf), dir);
    const auto from_hf = load_model(dir);
    const auto from_gguf = load_model(gguf);
    EXPECT_EQ(from_hf->config.architecture, pair.gguf.architecture) << pair.name;
    EXPECT_EQ(from_hf->config.n_experts, pair.gguf.n_experts) << pair.name;
    EXPECT_EQ(from_hf->config.n_experts_used, pair.gguf.n_experts_used) << pair.name;
    EXPECT_EQ(from_hf->config.d_ff_expert, pair.gguf.expert_width()) << pair.name;
    EXPECT_TRUE(from_hf->config.expert_weights_norm) << pair.name;
    expect_all_close(prefill_logits(from_hf, kPrompt), prefill_logits(from_gguf, kPrompt), 1e-5, pair.name);
  }
}

// The experts' names matter: the folder with gate and up swapped is a different model.
TEST(HfMoe, SwappedExpertNamesGiveADifferentModel) {
  const MoePair pair = pairs()[1];
  TempDir tmp;
  const std::string gguf = tmp.file("model.gguf");
  const RandomWeights weights = write_random_model(pair.gguf, gguf);
  HfWeights hf = hf_weights_from_gguf_layout(weights, pair.hf);
  for (HfLayer& layer : hf.layers) std::swap(layer.expert_gate, layer.expert_up);
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(pair.hf, hf, dir);
  const std::vector<float> a = prefill_logits(load_model(dir), kPrompt);
  const std::vector<float> b = prefill_logits(load_model(gguf), kPrompt);
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  EXPECT_GT(worst, 1e-2);
}

// `tandem convert` to a GGUF with llama.cpp's keys and stacked shapes. F32: the bytes as
// stored, so the file gives the folder's logits and greedy ids. F16: expert e's rows of each
// stacked tensor are the folder's expert e rounded to F16, bit for bit (its logits are not
// compared: a rounding that moves a token's router logits across a near-tie picks another
// expert, a jump of whole units from that position on, as llama.cpp's routing also does).
TEST(HfMoe, ConvertStacksTheExperts) {
  for (const MoePair& pair : pairs()) {
    for (const std::string type : {"F32", "F16"}) {
      TempDir tmp;
      const std::string dir = make_dir(tmp.file("hf"));
      const HfModelSpec& spec = pair.hf;
      const HfWeights weights = random_hf_weights(spec);
      write_hf_model(spec, weights, dir);
      const std::string out = tmp.file("model.gguf");
      const testing::CommandResult result = tandem_convert(dir, out, type);
      ASSERT_EQ(result.exit_code, 0) << result.err;
      const GgufFile file = GgufFile::open(out);
      const std::string arch = pair.gguf.architecture;
      EXPECT_EQ(file.get_string("general.architecture"), arch);
      EXPECT_EQ(file.get_int(arch + ".expert_count"), spec.n_experts);
      EXPECT_EQ(file.get_int(arch + ".expert_used_count"), spec.n_experts_used);
      EXPECT_EQ(file.get_int(arch + ".expert_feed_forward_length").has_value(), arch == "qwen3moe");
      const GgufTensorInfo* router = file.find_tensor("blk.0.ffn_gate_inp.weight");
      ASSERT_NE(router, nullptr);
      EXPECT_EQ(router->view.dtype, DType::F32);
      EXPECT_EQ(file.find_tensor("blk.0.ffn_gate.weight"), nullptr);
      const int64_t width = spec.expert_width();
      for (int64_t l = 0; l < spec.n_layers; ++l) {
        const HfLayer& layer = weights.layers[static_cast<size_t>(l)];
        for (const auto& [name, experts] :
             {std::pair{"ffn_gate_exps", &layer.expert_gate}, std::pair{"ffn_up_exps", &layer.expert_up},
              std::pair{"ffn_down_exps", &layer.expert_down}}) {
          const GgufTensorInfo* info = file.find_tensor(fmt::format("blk.{}.{}.weight", l, name));
          ASSERT_NE(info, nullptr) << name;
          const bool down = std::string(name) == "ffn_down_exps";
          const int64_t rows = down ? spec.d_model : width, cols = down ? width : spec.d_model;
          ASSERT_EQ(info->view.shape_string(), fmt::format("[{}, {}, {}]", spec.n_experts, rows, cols)) << name;
          EXPECT_EQ(info->view.dtype, type == "F32" ? DType::F32 : DType::F16) << name;
          int64_t unequal = 0;
          std::vector<float> row(static_cast<size_t>(cols));
          for (int64_t e = 0; e < spec.n_experts; ++e)
            for (int64_t r = 0; r < rows; ++r) {
              dequantize_row(info->view.dtype, info->view.row(e * rows + r), row.data(), cols);
              std::vector<float> expected(experts->at(static_cast<size_t>(e)).values.begin() + r * cols,
                                          experts->at(static_cast<size_t>(e)).values.begin() + (r + 1) * cols);
              hf_detail::round_through(info->view.dtype, expected);
              unequal += row == expected ? 0 : 1;
            }
          EXPECT_EQ(unequal, 0) << pair.name << " " << type << " layer " << l << " " << name;
        }
      }
      if (type == "F32") {
        const auto hf = load_model(dir);
        const auto converted = load_model(out);
        expect_all_close(prefill_logits(hf, kPrompt), prefill_logits(converted, kPrompt), 1e-5, pair.name);
        EXPECT_EQ(greedy_ids(hf, kPrompt, 12), greedy_ids(converted, kPrompt, 12)) << pair.name;
      }
    }
  }
}

std::string load_error(const std::string& path) {
  try {
    load_model(path);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

TEST(HfMoe, UnsupportedConfigsAreOneLineErrors) {
  TempDir tmp;
  // norm_topk_prob false: runs from the folder, but llama.cpp's qwen3moe cannot say it.
  HfModelSpec plain = pairs()[0].hf;
  plain.norm_topk_prob = false;
  const std::string plain_dir = make_dir(tmp.file("plain"));
  write_hf_model(plain, random_hf_weights(plain), plain_dir);
  EXPECT_FALSE(load_model(plain_dir)->config.expert_weights_norm);
  const testing::CommandResult refused = tandem_convert(plain_dir, tmp.file("plain.gguf"), "F32");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("norm_topk_prob false"), std::string::npos) << refused.err;

  HfModelSpec dense = pairs()[0].hf;
  dense.mlp_only_layers = nlohmann::ordered_json::array({1});
  const std::string dense_dir = make_dir(tmp.file("dense"));
  write_hf_model(dense, random_hf_weights(dense), dense_dir);
  const std::string dense_error = load_error(dense_dir);
  EXPECT_NE(dense_error.find("layers without experts"), std::string::npos) << dense_error;
  EXPECT_NE(dense_error.find(dense_dir), std::string::npos) << dense_error;
  EXPECT_EQ(dense_error.find('\n'), std::string::npos) << dense_error;

  // More experts in config.json than tensors in the folder.
  HfModelSpec short_spec = pairs()[1].hf;
  const std::string short_dir = make_dir(tmp.file("short"));
  write_hf_model(short_spec, random_hf_weights(short_spec), short_dir);
  std::string config;
  {
    std::ifstream in(short_dir + "/config.json");
    config.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto json = nlohmann::json::parse(config);
  json["num_local_experts"] = 4;
  write_text(short_dir + "/config.json", json.dump());
  const std::string short_error = load_error(short_dir);
  EXPECT_NE(short_error.find("tensor 'model.layers.0.block_sparse_moe.gate.weight' has shape [3, 48], but "
                             "config.json implies [4, 48]"),
            std::string::npos)
      << short_error;
  json["num_local_experts"] = 3;
  json["num_experts_per_tok"] = 4;
  write_text(short_dir + "/config.json", json.dump());
  const std::string used_error = load_error(short_dir);
  EXPECT_NE(used_error.find("experts used per token 4 is outside 1..3"), std::string::npos) << used_error;
}

}  // namespace
}  // namespace tandem
