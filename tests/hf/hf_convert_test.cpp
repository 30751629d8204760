// Issue 5, evidence 2: the same random model saved as HF safetensors (by hf_model_writer.h)
// and converted to GGUF by the real `tandem convert` binary gives the same greedy ids and
// logits both ways (Llama MHA and GQA, tied, F16, Qwen2 with biases, Qwen3 with its own head
// size and Q/K norms, Llama 3 RoPE scaling); sharded == single file; a GGUF-layout model
// written the HF way loads to the same logits; Qwen3's GGUF keys and tensors as llama.cpp names them.
#include <gtest/gtest.h>

#include "hf/hf_model_writer.h"
#include "hf/hf_test_support.h"
#include "io/gguf_file.h"

namespace tandem {
namespace {

using namespace test_support;

const std::vector<int32_t> kPrompt = {1, 5, 9, 2, 33, 60, 17, 4, 40, 11};

struct ConvertCase {
  std::string name;
  HfModelSpec spec;
  std::string type;
  double tolerance;
};

class HfConvertTest : public ::testing::TestWithParam<ConvertCase> {};

TEST_P(HfConvertTest, ConvertedGgufMatchesSafetensors) {
  const ConvertCase& c = GetParam();
  TempDir tmp;
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(c.spec, random_hf_weights(c.spec), dir);
  const std::string gguf = tmp.file("model.gguf");
  const testing::CommandResult result = tandem_convert(dir, gguf, c.type);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_NE(result.err.find("convert: wrote"), std::string::npos) << result.err;

  const auto hf = load_model(dir);
  const auto converted = load_model(gguf);
  EXPECT_EQ(hf->format, "safetensors");
  EXPECT_EQ(converted->config.architecture, hf->config.architecture);
  EXPECT_EQ(converted->config.rope_freq_factors, hf->config.rope_freq_factors);
  expect_all_close(prefill_logits(hf, kPrompt), prefill_logits(converted, kPrompt), c.tolerance, c.name);
  EXPECT_EQ(greedy_ids(hf, kPrompt, 12), greedy_ids(converted, kPrompt, 12)) << c.name;
}

HfModelSpec spec_with(std::function<void(HfModelSpec&)> edit) {
  HfModelSpec spec;
  edit(spec);
  return spec;
}

INSTANTIATE_TEST_SUITE_P(
    Models, HfConvertTest,
    ::testing::Values(ConvertCase{"llama_mha", spec_with([](HfModelSpec& s) { s.n_kv_heads = 4; }), "F32", 1e-5},
                      ConvertCase{"llama_gqa", spec_with([](HfModelSpec& s) { s.seed = 11; }), "F32", 1e-5},
                      ConvertCase{"mistral_tied_unaligned", spec_with([](HfModelSpec& s) {
                                    s.model_type = "mistral";
                                    s.tied = true;
                                    s.unaligned = true;
                                  }),
                                  "F32", 1e-5},
                      ConvertCase{"llama_f16", spec_with([](HfModelSpec& s) { s.dtype = DType::F16; }), "F16", 1e-5},
                      ConvertCase{"qwen2_biases", spec_with([](HfModelSpec& s) {
                                    s.model_type = "qwen2";
                                    s.rope_theta = 1000000.0f;
                                    s.seed = 3;
                                  }),
                                  "F32", 1e-5},
                      ConvertCase{"qwen2_bf16_sharded", spec_with([](HfModelSpec& s) {
                                    s.model_type = "qwen2";
                                    s.dtype = DType::BF16;
                                    s.n_shards = 3;
                                  }),
                                  "BF16", 1e-5},
                      ConvertCase{"qwen3_head_dim_tied", spec_with([](HfModelSpec& s) {
                                    s.model_type = "qwen3";
                                    s.head_size = 16;  // hidden 48 / 4 heads would be 12
                                    s.tied = true;
                                    s.rope_theta = 1000000.0f;
                                    s.seed = 5;
                                  }),
                                  "F32", 1e-5},
                      ConvertCase{"qwen3_bf16_untied", spec_with([](HfModelSpec& s) {
                                    s.model_type = "qwen3";
                                    s.head_size = 8;
                                    s.n_kv_heads = 1;
                                    s.dtype = DType::BF16;
                                  }),
                                  "BF16", 1e-5},
                      ConvertCase{"llama3_rope_scaling",
                                  spec_with([](HfModelSpec& s) { s.rope_scaling = Llama3Scaling{}; }), "F32", 1e-5}),
    [](const ::testing::TestParamInfo<ConvertCase>& info) { return info.param.name; });

TEST(HfConvert, WritesLlamaCppMetadataAndTokenizerKeys) {
  TempDir tmp;
  HfModelSpec spec;
  spec.model_type = "qwen2";
  spec.d_model = 40;  // rows of 40 are not a multiple of 32: Q8_0 falls back to F16 there
  spec.n_heads = 4;
  spec.d_ff = 64;
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, random_hf_weights(spec), dir);
  const std::string gguf = tmp.file("model.gguf");
  const testing::CommandResult result = tandem_convert(dir, gguf, "Q8_0");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const GgufFile file = GgufFile::open(gguf);
  EXPECT_EQ(file.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(file.get_int("general.file_type"), 7);
  EXPECT_EQ(file.get_int("qwen2.embedding_length"), 40);
  EXPECT_EQ(file.get_int("qwen2.attention.head_count_kv"), 2);
  EXPECT_EQ(file.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file.get_string("tokenizer.ggml.pre"), "qwen2");
  const auto tokens = file.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ(static_cast<int64_t>(tokens->size()), spec.vocab_size);
  EXPECT_EQ((*tokens)[4], "abc");
  EXPECT_EQ((*tokens)[6], "<|end|>");
  EXPECT_EQ(file.get_string_array("tokenizer.ggml.merges"), (std::vector<std::string>{"a b", "ab c"}));
  EXPECT_EQ(file.get_int("tokenizer.ggml.bos_token_id"), 4);
  EXPECT_EQ(file.get_int("tokenizer.ggml.eos_token_id"), 6);
  const auto types = file.get_int_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.has_value());
  EXPECT_EQ((*types)[0], 1);
  EXPECT_EQ((*types)[6], 3);
  ASSERT_NE(file.find_tensor("blk.0.attn_q.bias"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.0.attn_q.bias")->view.dtype, DType::F32);
  EXPECT_EQ(file.find_tensor("blk.0.attn_norm.weight")->view.dtype, DType::F32);
  EXPECT_EQ(file.find_tensor("blk.0.ffn_gate.weight")->view.dtype, DType::F16);   // 40 columns
  EXPECT_EQ(file.find_tensor("blk.0.ffn_down.weight")->view.dtype, DType::Q8_0);  // 64 columns
  EXPECT_EQ(file.find_tensor("output.weight")->view.dtype, DType::F16);
  // The quantized file still loads and runs.
  const auto model = load_model(gguf);
  EXPECT_EQ(prefill_logits(model, kPrompt).size(), kPrompt.size() * static_cast<size_t>(spec.vocab_size));
}

// --type with the other 32-element formats: llama.cpp's file type, every matrix whose rows are
// whole blocks in the format (F16 for the rest), and the file runs.
TEST(HfConvert, BlockFormatsWriteTheirTypeAndRun) {
  TempDir tmp;
  HfModelSpec spec;
  spec.d_model = 64;  // d_ff stays 40: ffn_down's rows are not whole blocks
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, random_hf_weights(spec), dir);
  for (const auto& [type, file_type] : std::vector<std::pair<DType, int64_t>>{
           {DType::Q5_0, 8}, {DType::Q5_1, 9}, {DType::IQ4_NL, 25}, {DType::MXFP4, 38}}) {
    const std::string name(dtype_name(type));
    const std::string gguf = tmp.file(name + ".gguf");
    const testing::CommandResult result = tandem_convert(dir, gguf, name);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const GgufFile file = GgufFile::open(gguf);
    EXPECT_EQ(file.get_int("general.file_type"), file_type) << name;
    EXPECT_EQ(file.find_tensor("blk.0.attn_q.weight")->view.dtype, type) << name;
    EXPECT_EQ(file.find_tensor("blk.0.ffn_gate.weight")->view.dtype, type) << name;
    EXPECT_EQ(file.find_tensor("blk.0.ffn_down.weight")->view.dtype, DType::F16) << name;  // 40 columns
    const auto model = load_model(gguf);
    EXPECT_EQ(prefill_logits(model, kPrompt).size(), kPrompt.size() * static_cast<size_t>(spec.vocab_size)) << name;
  }
}

// Qwen3 as llama.cpp reads it: qwen3.* keys with the head size as key/value_length, per-head
// norms as attn_{q,k}_norm, no biases, no output.weight when tied, Q/K rows as HF stores them
// (llama.cpp's qwen3 uses NEOX RoPE, so they are not permuted), Qwen2's pre-tokenizer.
TEST(HfConvert, WritesQwen3AsLlamaCppNamesIt) {
  TempDir tmp;
  HfModelSpec spec;
  spec.model_type = "qwen3";
  spec.head_size = 16;
  spec.tied = true;
  const std::string dir = make_dir(tmp.file("hf"));
  const HfWeights weights = random_hf_weights(spec);
  write_hf_model(spec, weights, dir);
  const std::string gguf = tmp.file("model.gguf");
  const testing::CommandResult result = tandem_convert(dir, gguf, "F32");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const GgufFile file = GgufFile::open(gguf);
  EXPECT_EQ(file.get_string("general.architecture"), "qwen3");
  EXPECT_EQ(file.get_int("qwen3.embedding_length"), 48);
  EXPECT_EQ(file.get_int("qwen3.attention.head_count"), 4);
  EXPECT_EQ(file.get_int("qwen3.attention.key_length"), 16);
  EXPECT_EQ(file.get_int("qwen3.attention.value_length"), 16);
  EXPECT_EQ(file.get_int("qwen3.rope.dimension_count"), 16);
  EXPECT_EQ(file.get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(file.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.0.attn_q.bias"), nullptr);
  ASSERT_NE(file.find_tensor("blk.1.attn_k_norm.weight"), nullptr);
  EXPECT_EQ(file.find_tensor("blk.1.attn_k_norm.weight")->view.shape_string(), "[16]");
  EXPECT_EQ(file.find_tensor("blk.1.attn_k_norm.weight")->view.f32()[5], weights.layers[1].k_norm[5]);
  const TensorView& wq = file.find_tensor("blk.0.attn_q.weight")->view;
  EXPECT_EQ(wq.shape_string(), "[64, 48]");
  for (int64_t row : {0, 1, 8, 17, 63})  // HF row order kept
    EXPECT_EQ(reinterpret_cast<const float*>(wq.row(row))[3], weights.layers[0].wq.at(row, 3)) << row;
}

// The same Qwen3 weights written as a GGUF (tests/support's writer) and as an HF folder load to
// the same logits, bit for bit: both keep the rows as stored and pair them half-split.
TEST(HfConvert, SameQwen3WrittenBothWaysGivesSameLogits) {
  TempDir tmp;
  RandomModelSpec gguf_spec;
  gguf_spec.architecture = "qwen3";
  gguf_spec.head_size = 16;
  gguf_spec.n_heads = 4;
  gguf_spec.n_kv_heads = 2;
  gguf_spec.tied_output = true;
  const RandomWeights g = write_random_model(gguf_spec, tmp.file("model.gguf"));
  HfModelSpec spec;
  spec.model_type = "qwen3";
  spec.head_size = 16;
  spec.d_model = gguf_spec.d_model;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.d_ff = gguf_spec.d_ff;
  spec.vocab_size = gguf_spec.vocab_size;
  spec.rms_norm_eps = gguf_spec.rms_norm_eps;
  spec.rope_theta = gguf_spec.rope_freq_base;
  spec.context_length = gguf_spec.context_length;
  spec.tied = true;
  HfWeights w;
  w.embed = g.token_embedding, w.lm_head = g.output, w.norm = g.output_norm;
  for (const RandomLayer& gl : g.layers) {
    HfLayer layer{gl.attn_norm, gl.ffn_norm, {},        {}, {}, gl.wq, gl.wk, gl.wv, gl.wo,
                  gl.w_gate,    gl.w_up,     gl.w_down, {}, {}, {},    {},    {},    {}};
    layer.q_norm = gl.q_norm, layer.k_norm = gl.k_norm;
    w.layers.push_back(std::move(layer));
  }
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, w, dir);
  EXPECT_EQ(prefill_logits(load_model(dir), kPrompt), prefill_logits(load_model(tmp.file("model.gguf")), kPrompt));
}

TEST(HfConvert, ShardedEqualsSingleFile) {
  TempDir tmp;
  HfModelSpec spec;
  const HfWeights weights = random_hf_weights(spec);
  const std::string single = make_dir(tmp.file("single"));
  write_hf_model(spec, weights, single);
  spec.n_shards = 4;
  const std::string sharded = make_dir(tmp.file("sharded"));
  write_hf_model(spec, weights, sharded);
  ASSERT_TRUE(std::filesystem::exists(sharded + "/model.safetensors.index.json"));
  ASSERT_FALSE(std::filesystem::exists(sharded + "/model.safetensors"));
  EXPECT_EQ(prefill_logits(load_model(single), kPrompt), prefill_logits(load_model(sharded), kPrompt));
}

// The RoPE proof from the GGUF side: a model written by tests/model's GGUF writer
// (interleaved layout) and the same weights written the HF way (half-split layout, by an
// inverse permutation written independently of the loader's) give identical logits.
TEST(HfConvert, SameModelWrittenBothWaysGivesSameLogits) {
  TempDir tmp;
  RandomModelSpec gguf_spec;
  gguf_spec.d_model = 48;
  gguf_spec.n_heads = 4;
  gguf_spec.n_kv_heads = 2;
  gguf_spec.vocab_size = 67;
  const RandomWeights gguf_weights = write_random_model(gguf_spec, tmp.file("model.gguf"));
  HfModelSpec spec;
  spec.d_model = 48;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.d_ff = gguf_spec.d_ff;
  spec.vocab_size = gguf_spec.vocab_size;
  spec.rms_norm_eps = gguf_spec.rms_norm_eps;
  spec.rope_theta = gguf_spec.rope_freq_base;
  spec.context_length = gguf_spec.context_length;
  const std::string dir = make_dir(tmp.file("hf"));
  write_hf_model(spec, hf_weights_from_gguf_layout(gguf_weights, spec), dir);
  EXPECT_EQ(prefill_logits(load_model(dir), kPrompt), prefill_logits(load_model(tmp.file("model.gguf")), kPrompt));
}

}  // namespace
}  // namespace tandem
