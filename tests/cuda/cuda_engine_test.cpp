// The Engine on the CUDA forward pass (backends/cuda/cuda_step_forward.h), as run, chat and
// serve use it with --device cuda: which engine configs the device path refuses, and how
// (host logic, every CUDA build); on a device, aidreams260K's greedy ids from the Engine on
// CUDA equal the Engine on the CPU's, each request alone and all of them batched together with
// chunked prefills and prefix-cache reuse, and with prompt-lookup speculation, and `tandem run --device cuda --ids`
// prints what
// `--device cpu` prints. Both sides store K/V in f32, so a difference is the forward pass's.
#if defined(TANDEM_WITH_CUDA)
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "backends/cuda/cuda_step_forward.h"
#include "base/error.h"
#include "cuda/cuda_test_device.h"
#include "support/engine_greedy.h"
#include "support/random_model.h"
#include "support/run_binary.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

using testing::shared_path;

std::shared_ptr<const Model> random_llama(const test_support::TempDir& dir, const std::string& architecture) {
  test_support::RandomModelSpec spec;
  spec.architecture = architecture;
  spec.d_model = 64, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 96, spec.vocab_size = 67;
  spec.n_layers = 2, spec.context_length = 64, spec.dtype = DType::F16, spec.seed = 11;
  const std::string path = dir.file(architecture + ".gguf");
  test_support::write_random_model(spec, path);
  return load_model(path);
}

TEST(CudaEngine, NamesWhatTheDevicePathLacksForAnEngine) {
  test_support::TempDir dir;
  const std::shared_ptr<const Model> llama = random_llama(dir, "llama");
  EngineConfig config;
  config.kv_types = {DType::F32, DType::F32};
  EXPECT_EQ(cuda::cuda_engine_unsupported_reason(*llama, config), "");
  config.kv_types = {DType::F16, DType::F16};
  EXPECT_EQ(cuda::cuda_engine_unsupported_reason(*llama, config), "");
  config.kv_types = {DType::Q8_0, DType::Q8_0};
  EXPECT_NE(cuda::cuda_engine_unsupported_reason(*llama, config).find("f16 or f32"), std::string::npos);
  config.kv_types = {DType::F16, DType::F32};
  EXPECT_NE(cuda::cuda_engine_unsupported_reason(*llama, config).find("K and V alike"), std::string::npos);
  config.kv_types = {DType::F16, DType::F16};
  config.draft_model = llama;
  EXPECT_NE(cuda::cuda_engine_unsupported_reason(*llama, config).find("draft model"), std::string::npos);
  EXPECT_NE(cuda::cuda_engine_unsupported_reason(*random_llama(dir, "qwen3"), EngineConfig{}).find("Q/K norms"),
            std::string::npos);
}

// Decided before any device call, so it runs without a device too.
TEST(CudaEngine, AutoFallsBackToTheCpuWhereCudaRefusesInOneLine) {
  test_support::TempDir dir;
  const std::shared_ptr<const Model> qwen3 = random_llama(dir, "qwen3");
  EXPECT_EQ(cuda::cuda_device_forward(false)(qwen3, EngineConfig{}, 8), nullptr);
  try {
    cuda::cuda_device_forward(true)(qwen3, EngineConfig{}, 8);
    ADD_FAILURE() << "--device cuda accepted a model with Q/K norms";
  } catch (const InputError& error) {
    const std::string what = error.what();
    EXPECT_EQ(what.rfind("--device cuda: not supported on the GPU yet: per-head Q/K norms", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

const std::vector<std::string> kTexts = {"The dream", "Once upon a time", "The dream of the little",
                                         "Lily and Tom went to the park", "Once upon a time there was a big"};

EngineConfig aidreams_config() {
  EngineConfig config;
  config.max_seqs = 4;           // the fifth request waits for a slot
  config.max_batch_tokens = 12;  // prompts in chunks beside other requests' decode tokens
  config.block_size = 4;         // prompts sharing a few words share cached blocks
  config.kv_types = {DType::F32, DType::F32};
  return config;
}

TEST(CudaEngine, AidreamsGreedyEqualsTheCpuEngineAloneAndBatched) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::string path = shared_path(testing::kAidreamsGguf);
  const std::shared_ptr<const Model> model = load_model(path);
  const Tokenizer tokenizer = load_tokenizer(path, "", model->config.vocab_size);
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text : kTexts) prompts.push_back(tokenizer.encode(text, true));
  const int64_t max_tokens = 96;
  ThreadPool pool(2);

  Engine cpu(model, tokenizer, aidreams_config(), pool);
  const test_support::GreedyOutputs expected = test_support::run_greedy(cpu, prompts, max_tokens);
  EngineConfig device_config = aidreams_config();
  device_config.device_forward = cuda::cuda_device_forward(true);
  Engine device(model, tokenizer, device_config, pool);
  ASSERT_TRUE(device.on_device());

  for (size_t i = 0; i < prompts.size(); ++i) {
    const test_support::GreedyOutputs alone = test_support::run_greedy(device, {prompts[i]}, max_tokens);
    EXPECT_EQ(alone.tokens[0], expected.tokens[i]) << "alone: \"" << kTexts[i] << '"';
  }
  const test_support::GreedyOutputs batched = test_support::run_greedy(device, prompts, max_tokens);
  int64_t cached = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(batched.tokens[i].size(), static_cast<size_t>(max_tokens)) << i;
    EXPECT_EQ(batched.tokens[i], expected.tokens[i]) << "batched: \"" << kTexts[i] << '"';
    cached += batched.cached_tokens[i];
  }
  EXPECT_GT(cached, 0) << "no request reused a cached prefix";
  EXPECT_EQ(device.stats().blocks.used, 0) << "leaked KV blocks";
}

// Prompt lookup proposes tokens that the same forward pass verifies; rejected proposals
// leave K/V in the sequence's own slots, overwritten later: greedy output is unchanged.
TEST(CudaEngine, AidreamsPromptLookupEqualsPlainGreedyOnTheCpu) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::string path = shared_path(testing::kAidreamsGguf);
  const std::shared_ptr<const Model> model = load_model(path);
  const Tokenizer tokenizer = load_tokenizer(path, "", model->config.vocab_size);
  ThreadPool pool(2);
  const std::vector<int32_t> prompt = tokenizer.encode(kTexts[0], true);
  const int64_t max_tokens = 100;
  Engine cpu(model, tokenizer, aidreams_config(), pool);
  const std::vector<int32_t> expected = test_support::run_greedy(cpu, {prompt}, max_tokens).tokens[0];

  EngineConfig device_config = aidreams_config();
  device_config.device_forward = cuda::cuda_device_forward(true);
  Engine device(model, tokenizer, device_config, pool);
  EXPECT_EQ(test_support::run_prompt_lookup(device, prompt, max_tokens), expected);
  EXPECT_GT(device.stats().drafted_tokens, 0) << "nothing was proposed: the test lost its point";
  EXPECT_LT(device.stats().accepted_tokens, device.stats().drafted_tokens) << "no proposal was rejected";
}

TEST(CudaEngine, RunIdsOnCudaEqualTheCpus) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  // bench/device-check stages test_cuda without the build folder: its cli_run step runs this.
  if (!std::filesystem::exists(TANDEM_BINARY)) GTEST_SKIP() << TANDEM_BINARY << " is not here (a staged test_cuda)";
  // bench/device-check's cli_run step, shorter.
  const std::string common = "run -m " + testing::shell_quote(shared_path(testing::kAidreamsGguf)) +
                             " --kv-type f32 --ids --temp 0 -n 300 -t 2 -q -p \"The dream\"";
  const auto cpu = testing::run_tandem(common + " --device cpu");
  const auto device = testing::run_tandem(common + " --device cuda");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(device.exit_code, 0) << device.err;
  EXPECT_GT(cpu.out.size(), 100u) << cpu.out;
  EXPECT_EQ(device.out, cpu.out);
}

}  // namespace
}  // namespace tandem
#endif
