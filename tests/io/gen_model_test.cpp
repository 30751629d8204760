// gen-model end to end: the tandem binary writes a test-tiny model from the shared llama-spm
// vocabulary; the same seed gives the same bytes; the reader sees llama metadata and shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/quant.h"
#include "base/thread_pool.h"
#include "engine/sequence_logits.h"
#include "io/gguf_file.h"
#include "model/model.h"
#include "model/model_generator.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

constexpr const char* kVocab = "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf";
std::string vocab_path() { return testing::shared_path(kVocab); }

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int run_gen_model(const std::string& args) {
  const std::string command = std::string(TANDEM_BINARY) + " gen-model " + args + " 2>/dev/null";
  return std::system(command.c_str());
}

TEST(GenModel, BinaryIsDeterministicAndReadable) {
  TANDEM_REQUIRE_SHARED(kVocab);
  const std::string dir = ::testing::TempDir();
  const std::string a = dir + "tandem_gen_a.gguf", b = dir + "tandem_gen_b.gguf", c = dir + "tandem_gen_c.gguf";
  const std::string common = "--shape test-tiny --type Q8_0 --vocab-from " + vocab_path();
  ASSERT_EQ(run_gen_model(common + " --seed 7 -o " + a), 0);
  ASSERT_EQ(run_gen_model(common + " --seed 7 -o " + b), 0);
  ASSERT_EQ(run_gen_model(common + " --seed 8 -o " + c), 0);
  const std::vector<char> bytes_a = read_all(a);
  EXPECT_FALSE(bytes_a.empty());
  EXPECT_TRUE(bytes_a == read_all(b)) << "same seed, different bytes";
  EXPECT_FALSE(bytes_a == read_all(c)) << "different seeds, same bytes";

  const GgufFile file = GgufFile::open(a);
  EXPECT_EQ(file.get_string("general.architecture"), "llama");
  EXPECT_EQ(file.get_int("general.file_type"), 7);
  EXPECT_EQ(file.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(file.get_int("llama.block_count"), 2);
  EXPECT_EQ(file.get_int("llama.feed_forward_length"), 96);
  EXPECT_EQ(file.get_int("llama.attention.head_count"), 4);
  EXPECT_EQ(file.get_int("llama.attention.head_count_kv"), 2);
  EXPECT_EQ(file.get_int("llama.context_length"), 256);
  EXPECT_EQ(file.get_int("llama.rope.dimension_count"), 16);
  EXPECT_EQ(file.get_int("llama.vocab_size"), 32000);
  EXPECT_FLOAT_EQ(*file.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_FLOAT_EQ(*file.get_float("llama.rope.freq_base"), 10000.0f);
  const GgufFile vocab = GgufFile::open(vocab_path());
  EXPECT_EQ(file.get_string_array("tokenizer.ggml.tokens"), vocab.get_string_array("tokenizer.ggml.tokens"));
  EXPECT_EQ(file.get_string("tokenizer.ggml.model"), vocab.get_string("tokenizer.ggml.model"));

  auto shape = [&](const std::string& name) {
    const GgufTensorInfo* info = file.find_tensor(name);
    return info ? info->view.shape_string() : "missing";
  };
  EXPECT_EQ(file.tensors().size(), 3u + 2 * 9);
  EXPECT_EQ(shape("token_embd.weight"), "[32000, 64]");
  EXPECT_EQ(shape("output.weight"), "[32000, 64]");
  EXPECT_EQ(shape("output_norm.weight"), "[64]");
  EXPECT_EQ(shape("blk.1.attn_norm.weight"), "[64]");
  EXPECT_EQ(shape("blk.1.attn_q.weight"), "[64, 64]");
  EXPECT_EQ(shape("blk.1.attn_k.weight"), "[32, 64]");
  EXPECT_EQ(shape("blk.1.attn_v.weight"), "[32, 64]");
  EXPECT_EQ(shape("blk.1.attn_output.weight"), "[64, 64]");
  EXPECT_EQ(shape("blk.0.ffn_norm.weight"), "[64]");
  EXPECT_EQ(shape("blk.0.ffn_gate.weight"), "[96, 64]");
  EXPECT_EQ(shape("blk.0.ffn_up.weight"), "[96, 64]");
  EXPECT_EQ(shape("blk.0.ffn_down.weight"), "[64, 96]");
  EXPECT_EQ(file.find_tensor("token_embd.weight")->view.dtype, DType::Q8_0);
  EXPECT_EQ(file.find_tensor("blk.0.ffn_norm.weight")->view.dtype, DType::F32);

  // Norms are ones; weights look like N(0, 0.02).
  const TensorView norm = file.find_tensor("blk.0.ffn_norm.weight")->view;
  for (int64_t i = 0; i < norm.n_elements(); ++i) EXPECT_EQ(norm.f32()[i], 1.0f);
  const TensorView embed = file.find_tensor("token_embd.weight")->view;
  std::vector<float> row(64);
  double sum = 0, sum_sq = 0;
  const int64_t n_rows = 2000;
  for (int64_t r = 0; r < n_rows; ++r) {
    dequantize_row(DType::Q8_0, embed.row(r), row.data(), 64);
    for (float v : row) sum += v, sum_sq += double{v} * v;
  }
  const double n = static_cast<double>(n_rows * 64);
  EXPECT_NEAR(sum / n, 0.0, 0.001);
  EXPECT_NEAR(std::sqrt(sum_sq / n), 0.02, 0.001);
  for (const std::string& path : {a, b, c}) std::remove(path.c_str());
}

TEST(GenModel, BadFlagsFail) {
  TANDEM_REQUIRE_SHARED(kVocab);
  const std::string out = ::testing::TempDir() + "tandem_gen_bad.gguf";
  EXPECT_NE(run_gen_model("--shape nope --vocab-from " + vocab_path() + " -o " + out), 0);
  EXPECT_NE(run_gen_model("--shape test-tiny --type Q2_K --vocab-from " + vocab_path() + " -o " + out), 0);
  EXPECT_NE(run_gen_model("--shape test-tiny --vocab-from /nonexistent.gguf -o " + out), 0);
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(GenModel, LibraryWritesEveryType) {
  TANDEM_REQUIRE_SHARED(kVocab);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
    GeneratorOptions options;
    options.shape = "test-tiny";
    options.type = type;
    options.vocab_path = vocab_path();
    options.seed = 1;
    options.out_path = ::testing::TempDir() + "tandem_gen_type.gguf";
    int64_t last_done = 0, total = 0;
    options.progress = [&](int64_t done, int64_t n, int64_t, int64_t) { last_done = done, total = n; };
    generate_random_gguf(options);
    EXPECT_EQ(last_done, total);
    const GgufFile file = GgufFile::open(options.out_path);
    // test-tiny's rows (64, 96 wide) are not whole 256-element k-quant blocks: those fall back to Q8_0.
    const DType expected = dtype_traits(type).block_size == 256 ? DType::Q8_0 : type;
    EXPECT_EQ(file.find_tensor("blk.1.ffn_down.weight")->view.dtype, expected) << dtype_name(type);
    std::remove(options.out_path.c_str());
  }
}

TEST(GenModel, SameSeedGivesTheSameWeightsAtEveryType) {
  // A draft made at Q4_0 for a Q8_0 target (bench/spec) must hold the same weights up to
  // quantization: gen-model seeds every row from (seed, tensor, row), whatever the type.
  TANDEM_REQUIRE_SHARED(kVocab);
  std::vector<std::vector<float>> weights;
  for (DType type : {DType::F32, DType::Q8_0, DType::Q4_0}) {
    GeneratorOptions options;
    options.shape = "test-tiny";
    options.type = type;
    options.vocab_path = vocab_path();
    options.seed = 5;
    options.out_path = ::testing::TempDir() + "tandem_gen_same_seed.gguf";
    generate_random_gguf(options);
    const GgufFile file = GgufFile::open(options.out_path);
    const TensorView& view = file.find_tensor("blk.1.attn_q.weight")->view;
    ASSERT_EQ(view.dtype, type);
    std::vector<float> values(static_cast<size_t>(view.n_elements()));
    dequantize_row(view.dtype, view.data, values.data(), view.n_elements());
    weights.push_back(std::move(values));
    std::remove(options.out_path.c_str());
  }
  const auto relative_error = [&](const std::vector<float>& got) {
    double diff = 0.0, norm = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      diff += (got[i] - weights[0][i]) * (got[i] - weights[0][i]);
      norm += weights[0][i] * weights[0][i];
    }
    return std::sqrt(diff / norm);
  };
  EXPECT_LT(relative_error(weights[1]), 0.02);  // Q8_0
  EXPECT_LT(relative_error(weights[2]), 0.2);   // Q4_0
  EXPECT_GT(relative_error(weights[2]), 0.0);
}

TEST(GenModel, OutputScaleMultipliesTheLogitsAndNothingElse) {
  // output_norm.weight = S scales the final hidden state, so the logits by S. A power of two
  // scales every float exactly (Q8 activation scales too), so the logits are exactly 4x.
  TANDEM_REQUIRE_SHARED(kVocab);
  std::vector<std::vector<float>> logits;
  std::vector<std::vector<char>> token_embeddings;
  for (float scale : {1.0f, 4.0f}) {
    GeneratorOptions options;
    options.shape = "test-tiny";
    options.type = DType::Q8_0;
    options.vocab_path = vocab_path();
    options.seed = 3;
    options.output_scale = scale;
    options.out_path = ::testing::TempDir() + "tandem_gen_scale.gguf";
    generate_random_gguf(options);
    {
      const GgufFile file = GgufFile::open(options.out_path);
      const TensorView norm = file.find_tensor("output_norm.weight")->view;
      for (int64_t i = 0; i < norm.n_elements(); ++i) ASSERT_EQ(norm.f32()[i], scale);
      EXPECT_EQ(file.find_tensor("blk.0.attn_norm.weight")->view.f32()[0], 1.0f);
      const TensorView embed = file.find_tensor("token_embd.weight")->view;
      token_embeddings.emplace_back(static_cast<const char*>(embed.data),
                                    static_cast<const char*>(embed.data) + dtype_row_bytes(embed.dtype, 64) * 100);
    }
    ThreadPool pool(2);
    Forward forward(load_model(options.out_path), 16, pool);
    const std::vector<int32_t> ids = {1, 450, 4996, 17354, 1701, 29916, 432, 17204, 975, 278};
    logits.push_back(sequence_logits(forward, ids, 16, KvTypes{DType::F32, DType::F32}));
    std::remove(options.out_path.c_str());
  }
  EXPECT_TRUE(token_embeddings[0] == token_embeddings[1]) << "the weights must not change";
  ASSERT_EQ(logits[0].size(), logits[1].size());
  for (size_t i = 0; i < logits[0].size(); ++i) ASSERT_EQ(logits[1][i], 4.0f * logits[0][i]) << "logit " << i;
  EXPECT_NE(run_gen_model("--shape test-tiny --output-scale 0 --vocab-from " + vocab_path() + " -o " +
                          ::testing::TempDir() + "tandem_gen_bad_scale.gguf"),
            0);
}

}  // namespace
}  // namespace tandem
