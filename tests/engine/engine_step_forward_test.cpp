// The engine's StepForward seam (Engine::set_step_forward), as `serve --pipeline` uses it,
// without MPI: an engine over stage 0 of a random 3-layer model (layers [0, 2)) whose steps run
// stage 0 on the engine's own Forward and stage 1 (layer 2 and the head) on a Forward and KV
// cache of its own gives, token for token and logprob for logprob, what an engine over the
// whole model gives, for chunked prefills beside decodes; every step goes through the seam;
// the stage's KV pool is sized for its own layers; embeddings are refused on a stage without
// the head.
#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/engine.h"
#include "support/engine_greedy.h"
#include "support/random_model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

constexpr const char* kGpt2Vocab = "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
constexpr int64_t kVocab = 50257;  // the GPT-2 vocabulary's size

// The last stage in this process: what a pipeline's later ranks do, minus the messages.
class LocalLastStage final : public StepForward {
 public:
  LocalLastStage(std::shared_ptr<const Model> last, const Engine& engine, ThreadPool& pool)
      : forward_(last, engine.config().max_batch_tokens, pool, engine.context_length()),
        cache_(last->kv_shape(), engine.stats().blocks.total, engine.config().block_size, engine.config().kv_types) {}

  std::span<const float> run(Forward& local, const Batch& batch, KvCache& cache) override {
    ++steps;
    const std::span<const float> hidden = local.run_stage(batch, {}, cache);
    passed_.assign(hidden.begin(), hidden.end());  // as a message would carry them
    return forward_.run_stage(batch, passed_, cache_);
  }

  int64_t steps = 0;

 private:
  Forward forward_;
  KvCache cache_;
  std::vector<float> passed_;
};

TEST(EngineStepForward, TwoLocalStagesEqualTheWholeModel) {
  TANDEM_REQUIRE_SHARED(kGpt2Vocab);
  test_support::TempDir dir;
  test_support::RandomModelSpec spec;
  spec.d_model = 64, spec.n_layers = 3, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 96;
  spec.vocab_size = kVocab, spec.context_length = 128, spec.seed = 91;
  const std::string path = dir.file("model.gguf");
  test_support::write_random_model(spec, path);
  const auto whole = load_model(path);
  const auto first = load_model(path, {.layers = LayerRange{0, 2}});
  const auto last = load_model(path, {.layers = LayerRange{2, 3}});
  const Tokenizer tokenizer = load_tokenizer(testing::shared_path(kGpt2Vocab), "", kVocab);
  ThreadPool pool(2);

  const auto prompts = test_support::random_prompts(12, kVocab, {3, 21, 8, 17});
  const int64_t max_tokens = 12, top_logprobs = 3;
  Engine whole_engine(whole, tokenizer, test_support::chunked_prefill_config(), pool);
  const test_support::GreedyOutputs expected =
      test_support::run_greedy(whole_engine, prompts, max_tokens, top_logprobs);

  Engine stage_engine(first, tokenizer, test_support::chunked_prefill_config(), pool);
  // The same --kv-memory buys blocks of 2 layers instead of 3.
  EXPECT_EQ(stage_engine.stats().bytes_per_block * 3, whole_engine.stats().bytes_per_block * 2);
  EXPECT_GT(stage_engine.stats().blocks.total, whole_engine.stats().blocks.total);
  LocalLastStage last_stage(last, stage_engine, pool);
  stage_engine.set_step_forward(&last_stage);
  const test_support::GreedyOutputs got = test_support::run_greedy(stage_engine, prompts, max_tokens, top_logprobs);
  EXPECT_EQ(stage_engine.stats().blocks.used, 0) << "leaked KV blocks";
  EXPECT_EQ(last_stage.steps, stage_engine.stats().steps);
  EXPECT_GT(last_stage.steps, 0);
  ASSERT_EQ(got.tokens.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got.tokens[i], expected.tokens[i]) << "prompt " << i;
    ASSERT_EQ(got.logprobs[i].size(), expected.logprobs[i].size()) << "prompt " << i;
    for (size_t t = 0; t < got.logprobs[i].size(); ++t) {
      EXPECT_EQ(got.logprobs[i][t].chosen.token, expected.logprobs[i][t].chosen.token) << i << " token " << t;
      EXPECT_EQ(got.logprobs[i][t].chosen.logprob, expected.logprobs[i][t].chosen.logprob) << i << " token " << t;
    }
  }

  GenerationParams embedding;
  embedding.max_tokens = 1;
  embedding.sampling.temperature = 0.0f;
  embedding.pooling = Pooling::Mean;
  EXPECT_THROW(stage_engine.submit(prompts[0], embedding, [](RequestEvent&&) {}), InputError);
}

}  // namespace
}  // namespace tandem
