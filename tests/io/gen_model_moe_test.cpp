// gen-model's mixture-of-experts shapes: the bench-sized ones have ~1B parameters with their
// family's vocabulary (Qwen's 151936, Llama 2's 32000) and 8 experts of which 2 run; the test
// shapes write the expert keys and the stacked tensors as llama.cpp's converter names them
// (router f32 at any type), load as what they are, and `tandem info` prints the experts.
#include <gtest/gtest.h>

#include <cstdio>
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

// Parameters of a shape, counted here from its dimensions: embeddings (and an untied head),
// attention, norms, router and experts.
double parameters(const GeneratedShape& s, int64_t vocab) {
  const double d = static_cast<double>(s.d_model), q = static_cast<double>(s.n_heads * s.head_size());
  const double kv = static_cast<double>(s.n_kv_heads * s.head_size()), e = static_cast<double>(s.n_experts);
  const double per_layer = d * q * 2 + d * kv * 2 + 2 * d + e * d + e * 3 * d * static_cast<double>(s.expert_width());
  return static_cast<double>(vocab) * d * (s.tied_output ? 1 : 2) + d + static_cast<double>(s.n_layers) * per_layer;
}

TEST(GenModel, MoeBenchShapesHaveAboutABillionParameters) {
  const std::optional<GeneratedShape> qwen = find_generated_shape("qwen3moe-1b");
  const std::optional<GeneratedShape> mixtral = find_generated_shape("mixtral-1b");
  ASSERT_TRUE(qwen.has_value() && mixtral.has_value());
  EXPECT_EQ(qwen->architecture, "qwen3moe");
  EXPECT_EQ(mixtral->architecture, "llama");
  for (const GeneratedShape* s : {&*qwen, &*mixtral}) {
    EXPECT_EQ(s->n_experts, 8) << s->name;
    EXPECT_EQ(s->n_experts_used, 2) << s->name;
    const double total = parameters(*s, s == &*qwen ? 151936 : 32000);
    EXPECT_GT(total, 0.95e9) << s->name;
    EXPECT_LT(total, 1.1e9) << s->name;
  }
  EXPECT_EQ(qwen->head_size(), 128);  // Qwen3-0.6B's attention
  EXPECT_EQ(qwen->expert_width(), 1024);
  EXPECT_EQ(mixtral->expert_width(), mixtral->d_ff);  // a llama's experts are feed_forward_length wide
}

TEST(GenModel, MoeTestShapesWriteLlamaCppsExpertTensors) {
  TANDEM_REQUIRE_SHARED(kVocab);
  struct Case {
    const char* shape;
    const char* arch;
    int64_t width;
  };
  for (const Case& c : {Case{"test-qwen3moe", "qwen3moe", 64}, Case{"test-mixtral", "llama", 96}}) {
    GeneratorOptions options;
    options.shape = c.shape;
    options.type = DType::Q4_0;
    options.vocab_path = testing::shared_path(kVocab);
    options.out_path =
        ::testing::TempDir() + "tandem_gen_moe_" + c.shape + "_" + std::to_string(getpid()) + ".gguf";  // per process
    generate_random_gguf(options);
    const std::string arch = c.arch;
    {
      const GgufFile file = GgufFile::open(options.out_path);
      EXPECT_EQ(file.get_string("general.architecture"), arch);
      EXPECT_EQ(file.get_int(arch + ".expert_count"), 4);
      EXPECT_EQ(file.get_int(arch + ".expert_used_count"), 2);
      EXPECT_EQ(file.get_int(arch + ".expert_feed_forward_length").value_or(0), arch == "qwen3moe" ? c.width : 0);
      const GgufTensorInfo* router = file.find_tensor("blk.1.ffn_gate_inp.weight");
      ASSERT_NE(router, nullptr) << c.shape;
      EXPECT_EQ(router->view.shape_string(), "[4, 64]");
      EXPECT_EQ(router->view.dtype, DType::F32);
      for (const char* name : {"ffn_gate_exps", "ffn_up_exps"}) {
        const GgufTensorInfo* info = file.find_tensor(fmt::format("blk.1.{}.weight", name));
        ASSERT_NE(info, nullptr) << name;
        EXPECT_EQ(info->view.shape_string(), fmt::format("[4, {}, 64]", c.width)) << name;
        EXPECT_EQ(info->view.dtype, DType::Q4_0) << name;
      }
      EXPECT_EQ(file.find_tensor("blk.0.ffn_down_exps.weight")->view.shape_string(),
                fmt::format("[4, 64, {}]", c.width));
      EXPECT_EQ(file.find_tensor("blk.0.ffn_gate.weight"), nullptr);
      EXPECT_EQ(file.find_tensor("blk.0.ffn_down.weight"), nullptr);
    }
    const auto model = load_model(options.out_path);
    EXPECT_EQ(model->config.n_experts, 4);
    EXPECT_EQ(model->config.d_ff_expert, c.width);
    const testing::CommandResult info = testing::run_tandem("info -m " + testing::shell_quote(options.out_path));
    ASSERT_EQ(info.exit_code, 0) << info.err;
    const std::string experts = fmt::format("experts:         4 per layer, 2 used per token, expert width {}", c.width);
    EXPECT_NE(info.out.find(experts), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("weights renormalised"), std::string::npos) << info.out;
    std::remove(options.out_path.c_str());
  }
}

}  // namespace
}  // namespace tandem
