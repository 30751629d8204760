// The device forward pass (backends/cuda/cuda_forward.h) on random-weight Llama models: its
// logits against the CPU forward pass's on the same batch (scattered KV blocks, GQA, F32, F16
// and Q8_0 weights), prefill equal to decode bit for bit, a sequence's logits the same alone
// or batched with another, and CUDA graph replay equal to plain launches. Which models it refuses is host logic and
// runs everywhere; the rest skips without a device.
#if defined(TANDEM_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/cuda_forward.h"
#include "base/thread_pool.h"
#include "cuda/cuda_test_device.h"
#include "model/forward.h"
#include "support/float_ulps.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using test_support::RandomModelSpec;
using test_support::TempDir;

std::shared_ptr<const Model> random_model(const RandomModelSpec& spec, const TempDir& dir) {
  const std::string path = dir.file(spec.architecture + "-" + std::to_string(spec.seed) + ".gguf");
  test_support::write_random_model(spec, path);
  return load_model(path);
}

RandomModelSpec llama_spec(DType dtype) {
  RandomModelSpec spec;
  spec.d_model = 64, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 96, spec.vocab_size = 67;
  spec.n_layers = 2, spec.context_length = 64, spec.dtype = dtype, spec.seed = 7;
  return spec;
}

const std::vector<int32_t> kPrompt = {1, 5, 9, 13, 2, 44, 60, 3, 7, 21, 11};
const std::vector<int32_t> kBlocks = {5, 0, 3};  // block size 4: positions 0..11, scattered over the pool

Batch prompt_batch(const std::vector<int32_t>& tokens, int32_t first_position, const std::vector<int32_t>& blocks) {
  Batch batch;
  const int32_t seq = batch.add_sequence(blocks);
  for (size_t i = 0; i < tokens.size(); ++i) batch.add(tokens[i], first_position + static_cast<int32_t>(i), seq, true);
  return batch;
}

TEST(CudaForward, NamesWhatItDoesNotRun) {
  TempDir dir;
  EXPECT_EQ(cuda::CudaForward::unsupported_reason(*random_model(llama_spec(DType::Q8_0), dir)), "");
  RandomModelSpec qwen3 = llama_spec(DType::F32);
  qwen3.architecture = "qwen3", qwen3.seed = 8;
  EXPECT_NE(cuda::CudaForward::unsupported_reason(*random_model(qwen3, dir)).find("Q/K norms"), std::string::npos);
  RandomModelSpec windowed = llama_spec(DType::F16);
  windowed.sliding_window = 8, windowed.seed = 9;
  EXPECT_NE(cuda::CudaForward::unsupported_reason(*random_model(windowed, dir)).find("sliding-window"),
            std::string::npos);
}

class CudaForwardTypes : public ::testing::TestWithParam<DType> {};

TEST_P(CudaForwardTypes, LogitsMatchTheCpuForward) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TempDir dir;
  const std::shared_ptr<const Model> model = random_model(llama_spec(GetParam()), dir);
  const Batch batch = prompt_batch(kPrompt, 0, kBlocks);
  ThreadPool pool(2);
  Forward cpu(model, 16, pool);
  KvCache cache(model->config.kv_shape(), 8, 4, KvTypes{DType::F32, DType::F32});
  const std::span<const float> cpu_logits = cpu.run(batch, cache);
  const std::vector<float> expected(cpu_logits.begin(), cpu_logits.end());
  cuda::CudaForward device(model, {.max_batch_tokens = 16, .kv_blocks = 8, .block_size = 4, .kv_type = DType::F32});
  const std::span<const float> got = device.run(batch);
  ASSERT_EQ(got.size(), expected.size());
  // F32 weights: both sides multiply f32 activations, so only the order of the f32 sums
  // differs, through two layers. F16 and Q8_0 layers run on the tensor cores (this model's
  // shapes fit), which take activations rounded to f16; the CPU keeps F16's in f32 and
  // quantises Q8_0's to 8 bits (gemm_q8): those logits carry that rounding, bounded by a share
  // of the row's largest logit.
  const int64_t vocab = model->config.vocab_size;
  const bool quantized = GetParam() == DType::Q8_0;
  const bool f16_activations = GetParam() == DType::F16;
  for (size_t row = 0; row < got.size() / static_cast<size_t>(vocab); ++row) {
    const float* e = expected.data() + row * vocab;
    const float* g = got.data() + row * vocab;
    float scale = 1.0f;
    for (int64_t i = 0; i < vocab; ++i) scale = std::max(scale, std::fabs(e[i]));
    for (int64_t i = 0; i < vocab; ++i) {
      const double tolerance = quantized         ? 3e-2 * scale
                               : f16_activations ? 1e-2 * scale
                                                 : 2e-4 * std::max(1.0f, std::fabs(e[i]));
      ASSERT_NEAR(g[i], e[i], tolerance) << "row " << row << " logit " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, CudaForwardTypes, ::testing::Values(DType::F32, DType::F16, DType::Q8_0),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

// The tensor-core layers against the same model on the CUDA-core kernels (TANDEM_CUDA_MMA=0):
// the same logits up to the f16 rounding of the activations.
TEST(CudaForward, TensorCoreLayersAgreeWithTheCudaCoreKernels) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TempDir dir;
  for (const DType type : {DType::F16, DType::Q8_0}) {
    const std::shared_ptr<const Model> model = random_model(llama_spec(type), dir);
    const cuda::CudaForwardOptions options{
        .max_batch_tokens = 16, .kv_blocks = 8, .block_size = 4, .kv_type = DType::F32};
    cuda::CudaForward tensor_cores(model, options);
    ASSERT_EQ(tensor_cores.mma_layers(), model->config.n_layers) << dtype_name(type);
    const std::span<const float> got_span = tensor_cores.run(prompt_batch(kPrompt, 0, kBlocks));
    const std::vector<float> got(got_span.begin(), got_span.end());
    ::setenv("TANDEM_CUDA_MMA", "0", 1);
    cuda::CudaForward cuda_cores(model, options);
    ::unsetenv("TANDEM_CUDA_MMA");
    ASSERT_EQ(cuda_cores.mma_layers(), 0);
    const std::span<const float> expected = cuda_cores.run(prompt_batch(kPrompt, 0, kBlocks));
    ASSERT_EQ(got.size(), expected.size());
    const int64_t vocab = model->config.vocab_size;
    for (size_t row = 0; row < got.size() / static_cast<size_t>(vocab); ++row) {
      float scale = 1.0f;
      for (int64_t i = 0; i < vocab; ++i) scale = std::max(scale, std::fabs(expected[row * vocab + i]));
      for (int64_t i = 0; i < vocab; ++i)
        ASSERT_NEAR(got[row * vocab + i], expected[row * vocab + i], 1e-2 * scale)
            << dtype_name(type) << " row " << row << " logit " << i;
    }
  }
}

TEST(CudaForward, PrefillEqualsDecodeAndBatchingChangesNothing) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  TempDir dir;
  const std::shared_ptr<const Model> model = random_model(llama_spec(DType::F16), dir);
  const int64_t vocab = model->config.vocab_size;
  cuda::CudaForward device(model, {.max_batch_tokens = 32, .kv_blocks = 8, .block_size = 4, .kv_type = DType::F16});
  ASSERT_EQ(device.mma_layers(), model->config.n_layers) << "the F16 layers should run on the tensor cores";
  const std::span<const float> prefill_span = device.run(prompt_batch(kPrompt, 0, kBlocks));
  const std::vector<float> prefill(prefill_span.begin(), prefill_span.end());
  // The same prompt as a 6-token chunk then single tokens, in other blocks of the pool.
  const std::vector<int32_t> other_blocks = {1, 7, 2};
  std::vector<float> stepwise;
  const std::vector<int32_t> head(kPrompt.begin(), kPrompt.begin() + 6);
  const std::span<const float> chunk = device.run(prompt_batch(head, 0, other_blocks));
  stepwise.assign(chunk.begin(), chunk.end());
  for (size_t i = 6; i < kPrompt.size(); ++i) {
    const std::span<const float> step = device.run(prompt_batch({kPrompt[i]}, static_cast<int32_t>(i), other_blocks));
    stepwise.insert(stepwise.end(), step.begin(), step.end());
  }
  ASSERT_EQ(stepwise.size(), prefill.size());
  for (size_t i = 0; i < prefill.size(); ++i)
    ASSERT_TRUE(same_bits(stepwise[i], prefill[i])) << "position " << i / vocab << " logit " << i % vocab;
  // Two sequences in one batch: the first's rows are the bits it got alone.
  Batch both = prompt_batch(kPrompt, 0, kBlocks);
  const int32_t second = both.add_sequence(std::vector<int32_t>{4, 6});
  for (int32_t p = 0; p < 7; ++p) both.add(30 + p, p, second, true);
  const std::span<const float> batched = device.run(both);
  for (size_t i = 0; i < prefill.size(); ++i)
    ASSERT_TRUE(same_bits(batched[i], prefill[i])) << "position " << i / vocab << " logit " << i % vocab;
}

// Decode steps replayed from CUDA graphs give the bits plain launches give: two sequences
// decoding together with growing contexts (the block tables and positions change, the graph
// does not), then one alone (another shape, another graph), then both again (the first graph,
// replayed after the other). Q8_0 weights: the QKV and gate/up matrices are concatenated.
TEST(CudaForward, GraphReplayEqualsPlainLaunches) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const char* env = std::getenv("TANDEM_CUDA_GRAPHS");
  if (env != nullptr && std::strcmp(env, "0") == 0) GTEST_SKIP() << "TANDEM_CUDA_GRAPHS=0 turns graphs off";
  TempDir dir;
  const std::shared_ptr<const Model> model = random_model(llama_spec(DType::Q8_0), dir);
  const int64_t vocab = model->config.vocab_size;
  cuda::CudaForwardOptions options{.max_batch_tokens = 32, .kv_blocks = 16, .block_size = 4, .kv_type = DType::F16};
  cuda::CudaForward graphed(model, options);
  options.cuda_graphs = false;
  cuda::CudaForward plain(model, options);
  const std::vector<int32_t> blocks_a = {5, 0, 3, 8, 9, 12}, blocks_b = {1, 7, 2, 10, 11, 13};
  auto same = [&](const Batch& batch, const std::string& what) {
    const std::span<const float> expected_span = plain.run(batch);
    const std::vector<float> expected(expected_span.begin(), expected_span.end());
    const std::span<const float> got = graphed.run(batch);
    ASSERT_EQ(got.size(), expected.size()) << what;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_TRUE(same_bits(got[i], expected[i])) << what << ": row " << i / vocab << " logit " << i % vocab;
  };
  // Prompts: 11 tokens for the first sequence, 7 for the second.
  Batch prompts = prompt_batch(kPrompt, 0, blocks_a);
  const int32_t second = prompts.add_sequence(blocks_b);
  for (int32_t p = 0; p < 7; ++p) prompts.add(30 + p, p, second, p == 6);
  same(prompts, "prompts");
  int32_t position_a = 11, position_b = 7;
  for (int step = 0; step < 12; ++step) {
    const bool both = step < 4 || step >= 8;
    Batch batch;
    const int32_t a = batch.add_sequence(blocks_a);
    batch.add(static_cast<int32_t>((step * 7 + 3) % vocab), position_a++, a, true);
    if (both) {
      const int32_t b = batch.add_sequence(blocks_b);
      batch.add(static_cast<int32_t>((step * 11 + 5) % vocab), position_b++, b, true);
    }
    same(batch, "decode step " + std::to_string(step));
  }
  EXPECT_EQ(graphed.graphs_off_reason(), "");
  EXPECT_GE(graphed.graph_replays(), 12) << graphed.graphs_off_reason();
  EXPECT_EQ(plain.graph_replays(), 0);
}

}  // namespace
}  // namespace tandem
#endif
