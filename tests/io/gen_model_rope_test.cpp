// gen-model's Phi-3 shapes and RoPE scaling options end to end: the binary writes test-phi3 (fused
// attn_qkv and gate+up ffn_up, partial RoPE, LongRoPE keys and factor tensors as llama.cpp's
// converter writes them, Phi-3's chat tokens added to the vocabulary) and llama files with each scaling type; they load
// with that scaling, `tandem info` prints it, and an unknown type is a one-line error naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <unistd.h>

#include "io/gguf_file.h"
#include "model/model.h"
#include "model/model_generator.h"
#include "support/run_binary.h"
#include "support/shared_data.h"

namespace tandem {
namespace {

constexpr const char* kVocab = "tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf";

// Named by process: other checkouts' test runs share the temp dir.
std::string temp_file(const std::string& name) {
  return ::testing::TempDir() + "tandem_gen_rope_" + std::to_string(getpid()) + "_" + name + ".gguf";
}

testing::CommandResult gen_model(const std::string& args, const std::string& out) {
  return testing::run_tandem("gen-model --vocab-from " + testing::shell_quote(testing::shared_path(kVocab)) + " " +
                             args + " -o " + testing::shell_quote(out));
}

TEST(GenModelRope, Phi3ShapesAreTheRealOnes) {
  const std::optional<GeneratedShape> mini = find_generated_shape("phi3-mini");
  ASSERT_TRUE(mini.has_value());
  EXPECT_EQ(mini->architecture, "phi3");
  EXPECT_EQ(mini->d_model, 3072);
  EXPECT_EQ(mini->n_layers, 32);
  EXPECT_EQ(mini->n_kv_heads, 32);
  EXPECT_EQ(mini->d_ff, 8192);
  EXPECT_EQ(mini->context_length, 4096);
  EXPECT_EQ(mini->longrope_original_context, 0);
  const std::optional<GeneratedShape> phi4 = find_generated_shape("phi-4-mini");
  ASSERT_TRUE(phi4.has_value());
  EXPECT_EQ(phi4->n_heads, 24);
  EXPECT_EQ(phi4->n_kv_heads, 8);
  EXPECT_EQ(phi4->head_size(), 128);
  EXPECT_EQ(phi4->rotary_dims(), 96);  // partial_rotary_factor 0.75
  EXPECT_EQ(phi4->context_length, 131072);
  EXPECT_EQ(phi4->longrope_original_context, 4096);
  EXPECT_TRUE(phi4->tied_output);
}

TEST(GenModelRope, TestPhi3IsLaidOutAsLlamaCppsPhi3) {
  TANDEM_REQUIRE_SHARED(kVocab);
  const std::string path = temp_file("phi3");
  const testing::CommandResult made = gen_model("--shape test-phi3 --type F32", path);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  {
    const GgufFile file = GgufFile::open(path);
    EXPECT_EQ(file.get_string("general.architecture"), "phi3");
    EXPECT_EQ(file.get_int("phi3.rope.dimension_count"), 12);
    EXPECT_EQ(file.get_int("phi3.context_length"), 1024);
    // Llama 2's vocabulary with Phi-3's chat tokens, padded to 32064, as Phi-3's GGUFs hold it.
    EXPECT_EQ(file.get_int("phi3.vocab_size"), 32064);
    const std::vector<std::string> tokens = *file.get_string_array("tokenizer.ggml.tokens");
    ASSERT_EQ(tokens.size(), 32064u);
    EXPECT_EQ(tokens[32000], "<|endoftext|>");
    EXPECT_EQ(tokens[32010], "<|user|>");
    EXPECT_EQ(tokens[32063], "[PAD32063]");
    EXPECT_EQ((*file.get_int_array("tokenizer.ggml.token_type"))[32007], 3);  // <|end|>, control
    EXPECT_EQ(file.get_int("phi3.rope.scaling.original_context_length"), 256);
    EXPECT_EQ(file.get_string("phi3.rope.scaling.type"), "longrope");
    EXPECT_NEAR(*file.get_float("phi3.rope.scaling.attn_factor"), std::sqrt(1.0 + std::log(4.0) / std::log(256.0)),
                1e-6);
    EXPECT_EQ(file.find_tensor("blk.1.attn_qkv.weight")->view.shape_string(), "[128, 64]");
    EXPECT_EQ(file.find_tensor("blk.1.ffn_up.weight")->view.shape_string(), "[192, 64]");
    EXPECT_EQ(file.find_tensor("rope_factors_long.weight")->view.shape_string(), "[6]");
    EXPECT_EQ(file.find_tensor("rope_factors_short.weight")->view.shape_string(), "[6]");
    for (const char* absent : {"blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.ffn_gate.weight", "output.weight"})
      EXPECT_EQ(file.find_tensor(absent), nullptr) << absent;
  }
  const auto model = load_model(path);
  EXPECT_EQ(model->config.rope_scaling.type, RopeScalingType::LongRope);
  EXPECT_EQ(model->config.rope_scaling.long_factors.back(), 4.0f);  // the last pair slowed by s
  const testing::CommandResult info = testing::run_tandem("info -m " + testing::shell_quote(path));
  ASSERT_EQ(info.exit_code, 0) << info.err;
  for (const char* line : {"architecture:    phi3", "rope_dims:       12", "rope pairs:      half-split",
                           "rope scaling:    longrope, factor 4, original context 256, long factors when the context "
                           "exceeds 256 (short otherwise), magnitude 1.1180"})
    EXPECT_NE(info.out.find(line), std::string::npos) << line << "\n" << info.out;
  // And it runs: two greedy tokens.
  const testing::CommandResult run =
      testing::run_tandem("run -m " + testing::shell_quote(path) + " -p 'Hello' -n 2 --temp 0 --ids");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  std::remove(path.c_str());
}

struct ScalingCase {
  const char* flags;
  RopeScalingType type;
  const char* info_line;
};

TEST(GenModelRope, LlamaFilesWithEachScalingType) {
  TANDEM_REQUIRE_SHARED(kVocab);
  const ScalingCase cases[] = {
      {"--rope-scaling none", RopeScalingType::None, "rope scaling:    none"},
      {"--rope-scaling linear --rope-factor 2", RopeScalingType::Linear,
       "rope scaling:    linear, factor 2, original context 128"},
      {"--rope-scaling yarn --rope-original-context 64", RopeScalingType::Yarn,
       "rope scaling:    yarn, factor 4, original context 64, beta_fast 32, beta_slow 1, ext_factor 1, magnitude "
       "1.1386"},
      {"--rope-scaling longrope --rope-original-context 64", RopeScalingType::LongRope,
       "rope scaling:    longrope, factor 4, original context 64"},
      {"--rope-scaling llama3 --rope-factor 8 --rope-original-context 32", RopeScalingType::None,
       "rope scaling:    per-pair frequency divisors (rope_freqs.weight"},
  };
  for (const ScalingCase& c : cases) {
    const std::string path = temp_file("llama");
    const testing::CommandResult made = gen_model(std::string("--shape test-tiny --type F32 ") + c.flags, path);
    ASSERT_EQ(made.exit_code, 0) << c.flags << ": " << made.err;
    const auto model = load_model(path);
    EXPECT_EQ(model->config.rope_scaling.type, c.type) << c.flags;
    const testing::CommandResult info = testing::run_tandem("info -m " + testing::shell_quote(path));
    EXPECT_NE(info.out.find(c.info_line), std::string::npos) << c.flags << "\n" << info.out;
    std::remove(path.c_str());
  }
}

TEST(GenModelRope, BadScalingFlagsAreOneLineErrors) {
  TANDEM_REQUIRE_SHARED(kVocab);
  const std::string path = temp_file("bad");
  const testing::CommandResult unknown = gen_model("--shape test-tiny --rope-scaling dynamic", path);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, "tandem: error: unsupported RoPE scaling type 'dynamic' (Tandem runs none, linear, yarn, "
                         "longrope, llama3)\n");
  const testing::CommandResult longrope_factor =
      gen_model("--shape test-phi3 --rope-scaling longrope --rope-factor 3", path);
  EXPECT_EQ(longrope_factor.exit_code, 1);
  EXPECT_NE(longrope_factor.err.find("--rope-factor does not apply to longrope"), std::string::npos)
      << longrope_factor.err;
}

}  // namespace
}  // namespace tandem
