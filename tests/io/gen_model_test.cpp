// gen-model end to end: the tandem binary writes a test-tiny model from the shared llama-spm
// vocabulary; the same seed gives the same bytes; the reader sees llama metadata and shapes;
// the qwen3 shapes write qwen3 files (own head size, Q/K norms, tied head) that load.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include "base/quant.h"
#include "base/thread_pool.h"
#include "engine/sequence_logits.h"
#include "io/gguf_file.h"
#include "model/model.h"
#include "model/model_generator.h"
#include "support/run_binary.h"
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
  EXPECT_NE(run_gen_model("--shape test-tiny --type Q4_1 --vocab-from " + vocab_path() + " -o " + out), 0);
  EXPECT_NE(run_gen_model("--shape test-tiny --vocab-from /nonexistent.gguf -o " + out), 0);
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(GenModel, LibraryWritesEveryType) {
  TANDEM_REQUIRE_SHARED(kVocab);
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                     DType::MXFP4, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q2_K, DType::Q3_K, DType::IQ4_XS}) {
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

// llama.cpp's Q3_K_M recipe on a 2-layer model: Q3_K, output Q6_K, attn_output Q4_K, attn_v
// Q5_K (first two layers), ffn_down Q4_K (2 / 16 rounds to no Q5_K layers); file_type 12.
TEST(GenModel, Q3KMMixFollowsTheRecipe) {
  TANDEM_REQUIRE_SHARED(kVocab);
  GeneratorOptions options;
  options.shape = "test-kquant";
  options.q3_k_m = true;
  options.vocab_path = vocab_path();
  options.out_path = ::testing::TempDir() + "tandem_gen_q3_k_m.gguf";
  generate_random_gguf(options);
  const GgufFile file = GgufFile::open(options.out_path);
  EXPECT_EQ(file.get_int("general.file_type"), 12);
  auto type_of = [&](const std::string& name) { return file.find_tensor(name)->view.dtype; };
  EXPECT_EQ(type_of("token_embd.weight"), DType::Q3_K);
  EXPECT_EQ(type_of("output.weight"), DType::Q6_K);
  for (const std::string layer : {"blk.0.", "blk.1."}) {
    EXPECT_EQ(type_of(layer + "attn_q.weight"), DType::Q3_K);
    EXPECT_EQ(type_of(layer + "attn_k.weight"), DType::Q3_K);
    EXPECT_EQ(type_of(layer + "attn_v.weight"), DType::Q5_K);
    EXPECT_EQ(type_of(layer + "attn_output.weight"), DType::Q4_K);
    EXPECT_EQ(type_of(layer + "ffn_gate.weight"), DType::Q3_K);
    EXPECT_EQ(type_of(layer + "ffn_up.weight"), DType::Q3_K);
    EXPECT_EQ(type_of(layer + "ffn_down.weight"), DType::Q4_K);
  }
  std::remove(options.out_path.c_str());
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

TEST(GenModel, LayerPrefixIsTheFullModelsFirstLayersAndBranchScaleScalesTheResidualBranches) {
  // bench/spec's early-exit draft: `--layers 1` of a model is that model's first layer, bit for
  // bit, with the same embedding and head; `--branch-scale` multiplies attn_output and ffn_down only.
  TANDEM_REQUIRE_SHARED(kVocab);
  auto generate = [](int64_t n_layers, float branch_scale, const std::string& name) {
    GeneratorOptions options;
    options.shape = "test-tiny";
    options.type = DType::F32;
    options.vocab_path = vocab_path();
    options.seed = 9;
    options.n_layers = n_layers;
    options.branch_scale = branch_scale;
    options.out_path = ::testing::TempDir() + name;
    generate_random_gguf(options);
    return options.out_path;
  };
  const std::string full_path = generate(0, 1.0f, "tandem_gen_full.gguf");
  const std::string damped_path = generate(0, 0.25f, "tandem_gen_damped.gguf");
  const std::string prefix_path = generate(1, 0.25f, "tandem_gen_prefix.gguf");
  const GgufFile full = GgufFile::open(full_path), damped = GgufFile::open(damped_path),
                 prefix = GgufFile::open(prefix_path);
  EXPECT_EQ(prefix.get_int("llama.block_count"), std::optional<int64_t>(1));
  EXPECT_EQ(prefix.find_tensor("blk.1.attn_q.weight"), nullptr);
  auto values = [](const GgufFile& file, const std::string& name) {
    const TensorView& view = file.find_tensor(name)->view;
    const auto* data = static_cast<const float*>(view.data);
    return std::vector<float>(data, data + view.n_elements());
  };
  for (const char* name : {"token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight"})
    EXPECT_EQ(values(prefix, name), values(damped, name)) << name;
  for (const char* name : {"blk.1.attn_q.weight", "blk.1.ffn_gate.weight", "output.weight"})
    EXPECT_EQ(values(damped, name), values(full, name)) << name;
  for (const char* name : {"blk.1.attn_output.weight", "blk.1.ffn_down.weight"}) {
    const std::vector<float> scaled = values(damped, name), unscaled = values(full, name);
    ASSERT_EQ(scaled.size(), unscaled.size());
    for (size_t i = 0; i < scaled.size(); ++i) ASSERT_FLOAT_EQ(scaled[i], 0.25f * unscaled[i]) << name << " " << i;
  }
  for (const std::string& path : {full_path, damped_path, prefix_path}) std::remove(path.c_str());
  EXPECT_NE(run_gen_model("--shape test-tiny --layers 3 --vocab-from " + vocab_path() + " -o /tmp/x.gguf"), 0);
  EXPECT_NE(run_gen_model("--shape test-tiny --branch-scale 0 --vocab-from " + vocab_path() + " -o /tmp/x.gguf"), 0);
}

// Qwen3 shapes: qwen3.* keys with key_length/value_length (heads of 32 over d_model 64 / 4
// heads), per-head Q/K norms, a tied head (no output.weight); the file loads as qwen3.
TEST(GenModel, Qwen3ShapeWritesQwen3Files) {
  constexpr const char* kGpt2Vocab = "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
  TANDEM_REQUIRE_SHARED(kGpt2Vocab);
  const std::optional<GeneratedShape> real = find_generated_shape("qwen3-0.6b");
  ASSERT_TRUE(real.has_value());
  EXPECT_EQ(real->d_model, 1024);
  EXPECT_EQ(real->n_layers, 28);
  EXPECT_EQ(real->head_size(), 128);
  EXPECT_EQ(real->n_heads * real->head_size(), 2048);
  EXPECT_EQ(real->context_length, 40960);
  EXPECT_TRUE(real->tied_output);
  // Qwen3-1.7B's config.json: hidden 2048, 16 heads of 128, 8 KV heads, intermediate 6144.
  const std::optional<GeneratedShape> bigger = find_generated_shape("qwen3-1.7b");
  ASSERT_TRUE(bigger.has_value());
  EXPECT_EQ(bigger->d_model, 2048);
  EXPECT_EQ(bigger->n_layers, 28);
  EXPECT_EQ(bigger->n_kv_heads, 8);
  EXPECT_EQ(bigger->head_size(), 128);
  EXPECT_EQ(bigger->d_ff, 6144);
  EXPECT_TRUE(bigger->tied_output);

  GeneratorOptions options;
  options.shape = "test-qwen3";
  options.type = DType::F32;
  options.vocab_path = testing::shared_path(kGpt2Vocab);
  // Named by process: other checkouts' test runs share the temp dir.
  options.out_path = ::testing::TempDir() + "tandem_gen_qwen3_" + std::to_string(getpid()) + ".gguf";
  generate_random_gguf(options);
  {
    const GgufFile file = GgufFile::open(options.out_path);
    EXPECT_EQ(file.get_string("general.architecture"), "qwen3");
    EXPECT_EQ(file.get_int("qwen3.embedding_length"), 64);
    EXPECT_EQ(file.get_int("qwen3.attention.head_count"), 4);
    EXPECT_EQ(file.get_int("qwen3.attention.key_length"), 32);
    EXPECT_EQ(file.get_int("qwen3.attention.value_length"), 32);
    EXPECT_EQ(file.get_int("qwen3.rope.dimension_count"), 32);
    EXPECT_FLOAT_EQ(*file.get_float("qwen3.rope.freq_base"), 1e6f);
    EXPECT_EQ(file.find_tensor("output.weight"), nullptr);
    EXPECT_EQ(file.find_tensor("blk.1.attn_q.weight")->view.shape_string(), "[128, 64]");
    EXPECT_EQ(file.find_tensor("blk.1.attn_k.weight")->view.shape_string(), "[64, 64]");
    EXPECT_EQ(file.find_tensor("blk.1.attn_output.weight")->view.shape_string(), "[64, 128]");
    EXPECT_EQ(file.find_tensor("blk.0.attn_q_norm.weight")->view.shape_string(), "[32]");
    EXPECT_EQ(file.find_tensor("blk.0.attn_k_norm.weight")->view.shape_string(), "[32]");
    EXPECT_EQ(file.tensors().size(), 2u + 2 * 11);
  }
  const auto model = load_model(options.out_path);
  EXPECT_EQ(model->config.head_dim, 32);
  EXPECT_TRUE(model->config.qk_norm);
  EXPECT_EQ(model->weights.output.data, model->weights.token_embedding.data);
  // tandem info names what is particular to the architecture.
  const testing::CommandResult info = testing::run_tandem("info -m " + testing::shell_quote(options.out_path));
  ASSERT_EQ(info.exit_code, 0) << info.err;
  for (const char* line : {"architecture:    qwen3", "head_dim:        32 (own size", "Q width 4 x 32 = 128",
                           "rope pairs:      half-split", "q/k norm:        RMSNorm per head",
                           "tied to token embeddings", "2 kv heads x 32 head dim"})
    EXPECT_NE(info.out.find(line), std::string::npos) << line << "\n" << info.out;
  std::remove(options.out_path.c_str());
}

// Windowed shapes: gemma3's keys as llama.cpp reads them (window, pattern, local RoPE base),
// its extra norms, gemma2's (window, both soft-caps, no Q/K norms), and test-sliding's llama.attention.sliding_window;
// tandem info says what the window applies to.
TEST(GenModel, WindowedShapesWriteTheirWindows) {
  TANDEM_REQUIRE_SHARED(kVocab);
  const std::optional<GeneratedShape> real = find_generated_shape("gemma3-1b");
  ASSERT_TRUE(real.has_value());
  EXPECT_EQ(real->d_model, 1152);
  EXPECT_EQ(real->n_layers, 26);
  EXPECT_EQ(real->head_size(), 256);
  EXPECT_EQ(real->sliding_window, 512);
  EXPECT_EQ(real->sliding_window_pattern, 6);
  // Gemma 2 2B's config.json.
  const std::optional<GeneratedShape> gemma2 = find_generated_shape("gemma2-2b");
  ASSERT_TRUE(gemma2.has_value());
  EXPECT_EQ(gemma2->architecture, "gemma2");
  EXPECT_EQ(gemma2->d_model, 2304);
  EXPECT_EQ(gemma2->n_layers, 26);
  EXPECT_EQ(gemma2->n_heads, 8);
  EXPECT_EQ(gemma2->n_kv_heads, 4);
  EXPECT_EQ(gemma2->head_size(), 256);
  EXPECT_EQ(gemma2->d_ff, 9216);
  EXPECT_EQ(gemma2->sliding_window, 4096);
  EXPECT_TRUE(gemma2->tied_output);
  struct Case {
    const char* shape;
    std::vector<const char*> info_lines;
  };
  for (const Case& c :
       {Case{"test-gemma3",
             {"architecture:    gemma3",
              "sliding window:  64 positions, 2 of 4 layers local, "
              "global layers 1,3, local RoPE base 10000",
              "gemma blocks:    GeGLU"}},
        Case{"test-gemma3-local", {"sliding window:  16 positions, every layer (the KV cache keeps only"}},
        Case{"test-gemma2",
             {"architecture:    gemma2", "sliding window:  32 positions, 2 of 4 layers local, global layers 1,3\n",
              "attn softcap:    50 (scores", "logit softcap:   30", "gemma blocks:    GeGLU"}},
        Case{"test-sliding", {"architecture:    llama", "sliding window:  32 positions, every layer"}}}) {
    GeneratorOptions options;
    options.shape = c.shape;
    options.type = DType::F32;
    options.vocab_path = testing::shared_path(kVocab);
    options.out_path = ::testing::TempDir() + "tandem_gen_window_" + std::to_string(getpid()) + ".gguf";
    generate_random_gguf(options);
    {
      const GgufFile file = GgufFile::open(options.out_path);
      const std::string arch = *file.get_string("general.architecture");
      EXPECT_GT(file.get_int(arch + ".attention.sliding_window").value_or(0), 0) << c.shape;
      if (arch == "gemma3") {
        EXPECT_TRUE(file.get_int("gemma3.attention.sliding_window_pattern").has_value());
        EXPECT_FLOAT_EQ(*file.get_float("gemma3.rope.freq_base_swa"), 10000.0f);
        EXPECT_NE(file.find_tensor("blk.1.post_attention_norm.weight"), nullptr);
        EXPECT_NE(file.find_tensor("blk.1.post_ffw_norm.weight"), nullptr);
        EXPECT_NE(file.find_tensor("blk.1.attn_q_norm.weight"), nullptr);
        EXPECT_EQ(file.find_tensor("output.weight"), nullptr);
      }
      if (arch == "gemma2") {  // llama.cpp's gemma2 keys; no Q/K norms
        EXPECT_FLOAT_EQ(*file.get_float("gemma2.attn_logit_softcapping"), 50.0f);
        EXPECT_FLOAT_EQ(*file.get_float("gemma2.final_logit_softcapping"), 30.0f);
        EXPECT_EQ(*file.get_int("gemma2.attention.key_length"), 32);
        EXPECT_NE(file.find_tensor("blk.1.post_ffw_norm.weight"), nullptr);
        EXPECT_EQ(file.find_tensor("blk.1.attn_q_norm.weight"), nullptr);
        EXPECT_EQ(file.find_tensor("output.weight"), nullptr);
      }
    }
    const testing::CommandResult info = testing::run_tandem("info -m " + testing::shell_quote(options.out_path));
    ASSERT_EQ(info.exit_code, 0) << info.err;
    for (const char* line : c.info_lines) EXPECT_NE(info.out.find(line), std::string::npos) << line << "\n" << info.out;
    std::remove(options.out_path.c_str());
  }
}

// gpt-oss-20b is gpt-oss-20b's config.json (defined, not generated: 21B parameters);
// test-gpt-oss writes llama.cpp's gpt-oss keys and tensors (biases, sinks, window, YaRN,
// expert width) that load, in F32, Q8_0 and MXFP4 (llama.cpp's MXFP4_MOE mix: experts MXFP4, the
// other matrices Q8_0, router and vectors f32), and tandem info says what is gpt-oss's own.
TEST(GenModel, GptOssShapesWriteGptOssFiles) {
  TANDEM_REQUIRE_SHARED(kVocab);
  const std::optional<GeneratedShape> real = find_generated_shape("gpt-oss-20b");
  ASSERT_TRUE(real.has_value());
  EXPECT_EQ(real->architecture, "gpt-oss");
  EXPECT_EQ(real->d_model, 2880);
  EXPECT_EQ(real->n_layers, 24);
  EXPECT_EQ(real->n_heads, 64);
  EXPECT_EQ(real->n_kv_heads, 8);
  EXPECT_EQ(real->head_size(), 64);
  EXPECT_EQ(real->n_experts, 32);
  EXPECT_EQ(real->n_experts_used, 4);
  EXPECT_EQ(real->expert_width(), 2880);
  EXPECT_EQ(real->expert_width() % 32, 0);  // whole MXFP4 blocks
  EXPECT_EQ(real->sliding_window, 128);
  EXPECT_EQ(real->yarn_factor, 32.0);
  EXPECT_EQ(real->yarn_original_context, 4096);
  EXPECT_EQ(real->context_length, 131072);
  EXPECT_FALSE(real->tied_output);
  for (DType type : {DType::F32, DType::Q8_0, DType::MXFP4}) {
    GeneratorOptions options;
    options.shape = "test-gpt-oss";
    options.type = type;
    options.vocab_path = testing::shared_path(kVocab);
    options.out_path = ::testing::TempDir() + "tandem_gen_gpt_oss_" + std::to_string(getpid()) + ".gguf";
    generate_random_gguf(options);
    {
      const GgufFile file = GgufFile::open(options.out_path);
      EXPECT_EQ(*file.get_string("general.architecture"), "gpt-oss");
      EXPECT_EQ(*file.get_int("gpt-oss.attention.sliding_window"), 32);
      EXPECT_EQ(*file.get_int("gpt-oss.expert_count"), 4);
      EXPECT_EQ(*file.get_int("gpt-oss.expert_used_count"), 2);
      EXPECT_EQ(*file.get_int("gpt-oss.expert_feed_forward_length"), 64);
      EXPECT_EQ(*file.get_int("gpt-oss.attention.key_length"), 32);
      EXPECT_EQ(*file.get_string("gpt-oss.rope.scaling.type"), "yarn");
      EXPECT_FLOAT_EQ(*file.get_float("gpt-oss.rope.scaling.factor"), 4.0f);
      EXPECT_EQ(*file.get_int("gpt-oss.rope.scaling.original_context_length"), 256);
      for (const char* name :
           {"blk.3.attn_sinks.weight", "blk.3.attn_q.bias", "blk.3.attn_output.bias", "blk.3.ffn_gate_inp.bias",
            "blk.3.ffn_down_exps.bias", "blk.3.post_attention_norm.weight", "output.weight"})
        EXPECT_NE(file.find_tensor(name), nullptr) << name;
      EXPECT_EQ(file.find_tensor("blk.0.ffn_norm.weight"), nullptr);
      const DType matrices = type == DType::MXFP4 ? DType::Q8_0 : type;
      EXPECT_EQ(file.find_tensor("blk.0.ffn_up_exps.weight")->view.dtype, type) << dtype_name(type);
      EXPECT_EQ(file.find_tensor("blk.0.attn_q.weight")->view.dtype, matrices) << dtype_name(type);
      EXPECT_EQ(file.find_tensor("token_embd.weight")->view.dtype, matrices) << dtype_name(type);
      EXPECT_EQ(file.find_tensor("blk.0.ffn_gate_inp.weight")->view.dtype, DType::F32);
      EXPECT_EQ(file.find_tensor("blk.0.attn_sinks.weight")->view.dtype, DType::F32);
      // Sinks are random, not zero: they must change the attention.
      const float* sinks = file.find_tensor("blk.0.attn_sinks.weight")->view.f32();
      EXPECT_NE(sinks[0], 0.0f);
      EXPECT_NE(sinks[0], sinks[1]);
    }
    const testing::CommandResult info = testing::run_tandem("info -m " + testing::shell_quote(options.out_path));
    ASSERT_EQ(info.exit_code, 0) << info.err;
    for (const char* line :
         {"architecture:    gpt-oss", "sliding window:  32 positions, 2 of 4 layers local, global layers 1,3\n",
          "attn sinks:      a learned logit per query head", "router (with bias) top 2, softmax over the chosen",
          "rope scaling:    yarn, factor 4, original context 256", "head_dim:        32 (own size"})
      EXPECT_NE(info.out.find(line), std::string::npos) << line << "\n" << info.out;
    std::remove(options.out_path.c_str());
  }
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
