// EngineConfig::device_forward, the seam `--device cuda` runs the engine through, without a
// device: a stand-in "device" that owns a Forward and a KV pool of its own, of the blocks the
// engine sized (as CudaStepForward does), gives, token for token and logprob for logprob, what
// the plain engine gives, for requests batched together, chunked, and reusing cached prefixes,
// and with prompt-lookup speculation;
// the engine's own KvCache then holds no bytes; requests that read K/V or hidden states on the
// host (embeddings, KV export and import) are refused in one line; a factory returning null
// leaves the engine on its own Forward.
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

// The stand-in device: its own pool of the engine's blocks; the engine's cache must be empty.
class PoolOfItsOwn final : public StepForward {
 public:
  PoolOfItsOwn(const std::shared_ptr<const Model>& model, const EngineConfig& config, int64_t n_blocks,
               ThreadPool& pool)
      : forward_(model, config.max_batch_tokens, pool, config.context_length),
        cache_(model->kv_shape(), n_blocks, config.block_size, config.kv_types) {}

  std::span<const float> run(Forward& /*local*/, const Batch& batch, KvCache& cache) override {
    ++steps;
    EXPECT_FALSE(cache.on_host());
    EXPECT_EQ(cache.n_blocks(), cache_.n_blocks());
    return forward_.run(batch, cache_);
  }

  int64_t steps = 0;

 private:
  Forward forward_;
  KvCache cache_;
};

class EngineDeviceForward : public ::testing::Test {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_SHARED(kGpt2Vocab);
    test_support::RandomModelSpec spec;
    spec.d_model = 64, spec.n_layers = 2, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 96;
    spec.vocab_size = kVocab, spec.context_length = 128, spec.seed = 93;
    const std::string path = dir_.file("model.gguf");
    test_support::write_random_model(spec, path);
    model_ = load_model(path);
    tokenizer_.emplace(load_tokenizer(testing::shared_path(kGpt2Vocab), "", kVocab));
  }

  // `config` with a device_forward that makes a PoolOfItsOwn (kept in device_).
  EngineConfig device_config(EngineConfig config = test_support::chunked_prefill_config()) {
    config.device_forward = [this](const std::shared_ptr<const Model>& model, const EngineConfig& engine_config,
                                   int64_t n_blocks) -> std::unique_ptr<StepForward> {
      auto device = std::make_unique<PoolOfItsOwn>(model, engine_config, n_blocks, pool_);
      device_ = device.get();
      return device;
    };
    return config;
  }

  test_support::TempDir dir_;
  std::shared_ptr<const Model> model_;
  std::optional<Tokenizer> tokenizer_;
  ThreadPool pool_{2};
  PoolOfItsOwn* device_ = nullptr;
};

TEST_F(EngineDeviceForward, EqualsTheHostBatchedChunkedAndReusingPrefixes) {
  // Prompts 3 and 4 begin with prompt 0 (cached blocks of it are reused), the rest are random.
  std::vector<std::vector<int32_t>> prompts = test_support::random_prompts(14, kVocab, {13, 21, 5, 17});
  prompts.push_back(prompts[0]);
  prompts.back().insert(prompts.back().end(), {7, 8, 9});
  prompts[3].insert(prompts[3].begin(), prompts[0].begin(), prompts[0].begin() + 12);
  const int64_t max_tokens = 10, top_logprobs = 2;
  Engine host(model_, *tokenizer_, test_support::chunked_prefill_config(), pool_);
  const test_support::GreedyOutputs expected = test_support::run_greedy(host, prompts, max_tokens, top_logprobs);

  Engine engine(model_, *tokenizer_, device_config(), pool_);
  ASSERT_TRUE(engine.on_device());
  ASSERT_NE(device_, nullptr);
  EXPECT_EQ(engine.stats().blocks.total, host.stats().blocks.total);  // the same --kv-memory, the same blocks
  const test_support::GreedyOutputs got = test_support::run_greedy(engine, prompts, max_tokens, top_logprobs);
  EXPECT_EQ(engine.stats().blocks.used, 0) << "leaked KV blocks";
  EXPECT_EQ(device_->steps, engine.stats().steps);
  EXPECT_GT(device_->steps, 0);
  ASSERT_EQ(got.tokens.size(), prompts.size());
  int64_t cached = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got.tokens[i], expected.tokens[i]) << "prompt " << i;
    EXPECT_EQ(got.cached_tokens[i], expected.cached_tokens[i]) << "prompt " << i;
    cached += got.cached_tokens[i];
    ASSERT_EQ(got.logprobs[i].size(), expected.logprobs[i].size()) << "prompt " << i;
    for (size_t t = 0; t < got.logprobs[i].size(); ++t)
      EXPECT_EQ(got.logprobs[i][t].chosen.logprob, expected.logprobs[i][t].chosen.logprob) << i << " token " << t;
  }
  EXPECT_GT(cached, 0) << "no prompt reused a cached prefix: the test lost its point";
}

// Proposals go into the sequence's own slots of the device's pool and are verified there;
// aidreams260K repeats itself, so prompt lookup proposes (and sometimes misses) often.
TEST_F(EngineDeviceForward, PromptLookupOnAidreamsEqualsPlainGreedy) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::string path = testing::shared_path(testing::kAidreamsGguf);
  const std::shared_ptr<const Model> model = load_model(path);
  const Tokenizer tokenizer = load_tokenizer(path, "", model->config.vocab_size);
  const std::vector<int32_t> prompt = tokenizer.encode("The dream", true);
  const int64_t max_tokens = 100;
  EngineConfig config = test_support::chunked_prefill_config();
  config.kv_memory_bytes = 0;  // max_seqs full contexts of this model
  Engine host(model, tokenizer, config, pool_);
  const std::vector<int32_t> expected = test_support::run_greedy(host, {prompt}, max_tokens).tokens[0];
  Engine engine(model, tokenizer, device_config(config), pool_);
  EXPECT_EQ(test_support::run_prompt_lookup(engine, prompt, max_tokens), expected);
  EXPECT_GT(engine.stats().drafted_tokens, 0) << "nothing was proposed: the test lost its point";
  EXPECT_LT(engine.stats().accepted_tokens, engine.stats().drafted_tokens) << "no proposal was rolled back";
}

TEST_F(EngineDeviceForward, RefusesWhatReadsKvOrHiddenStatesOnTheHost) {
  Engine engine(model_, *tokenizer_, device_config(), pool_);
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9};
  GenerationParams embedding;
  embedding.max_tokens = 1;
  embedding.sampling.temperature = 0.0f;
  embedding.pooling = Pooling::Mean;
  try {
    engine.submit(prompt, embedding, [](RequestEvent&&) {});
    ADD_FAILURE() << "an embedding request was accepted on the device";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("--device cpu"), std::string::npos) << error.what();
  }
  GenerationParams generate;
  generate.max_tokens = 2;
  generate.sampling.temperature = 0.0f;
  EXPECT_THROW(engine.submit_imported(
                   prompt, generate, [](RequestEvent&&) {}, std::make_shared<KvImport>(0, [](int64_t) {})),
               InputError);
  // A plain request still runs.
  int64_t tokens = 0;
  engine.submit(prompt, generate, [&](RequestEvent&& event) { tokens += static_cast<int64_t>(event.tokens.size()); });
  engine.run_until_idle();
  EXPECT_EQ(tokens, 2);
}

TEST_F(EngineDeviceForward, ANullFactoryLeavesTheEngineOnTheHost) {
  EngineConfig config = test_support::chunked_prefill_config();
  bool asked = false;
  config.device_forward = [&](const std::shared_ptr<const Model>&, const EngineConfig&, int64_t) {
    asked = true;
    return std::unique_ptr<StepForward>();
  };
  Engine engine(model_, *tokenizer_, config, pool_);
  EXPECT_TRUE(asked);
  EXPECT_FALSE(engine.on_device());
  const test_support::GreedyOutputs got = test_support::run_greedy(engine, {{3, 4, 5, 6}}, 3);
  EXPECT_EQ(got.tokens[0].size(), 3u);
}

}  // namespace
}  // namespace tandem
