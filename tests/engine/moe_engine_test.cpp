// Mixture-of-experts models through the engine: random qwen3moe, Mixtral-style llama and gpt-oss models
// (tests/support's writer) with the GPT-2 vocabulary from ../shared. Requests run together in
// chunked batches of a few tokens — some with the same prompt, so their tokens choose the same
// experts in the same step — give, token for token, the greedy ids each gets alone (the whole
// prompt in one forward pass, then a token per pass, on a KV pool of its own), on one thread
// and on two; no KV block is left in use.
#include <gtest/gtest.h>

#include <random>

#include "engine/engine.h"
#include "model/forward.h"
#include "support/random_model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

constexpr const char* kGpt2Vocab = "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
constexpr int64_t kVocab = 50257;  // the GPT-2 vocabulary's size

std::vector<int32_t> greedy_alone(const std::shared_ptr<const Model>& model, std::vector<int32_t> tokens,
                                  int64_t max_tokens) {
  ThreadPool pool(1);
  const auto n_prompt = static_cast<int64_t>(tokens.size());
  Forward forward(model, n_prompt, pool);
  // The engine's cache types: K/V rounded the same way on both sides.
  KvCache cache(model->config.kv_shape(), n_prompt + max_tokens, 1, kDefaultKvTypes);
  Sampler sampler(SamplingParams{.temperature = 0.0f}, model->config.vocab_size);
  Batch batch;
  batch.add_sequence(cache.whole_pool_blocks());
  for (int64_t i = 0; i < n_prompt; ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, i == n_prompt - 1);
  std::vector<int32_t> generated;
  while (static_cast<int64_t>(generated.size()) < max_tokens) {
    const int32_t next = sampler.sample(forward.run(batch, cache), tokens);
    tokens.push_back(next);
    generated.push_back(next);
    batch.clear();
    batch.add_sequence(cache.whole_pool_blocks());
    batch.add(next, static_cast<int32_t>(tokens.size() - 1), 0, true);
  }
  return generated;
}

TEST(MoeEngine, BatchedChunkedRequestsEqualEachAlone) {
  TANDEM_REQUIRE_SHARED(kGpt2Vocab);
  test_support::RandomModelSpec qwen;
  qwen.architecture = "qwen3moe", qwen.head_size = 24, qwen.n_heads = 4, qwen.n_kv_heads = 2;
  qwen.n_experts = 6, qwen.n_experts_used = 2, qwen.d_ff_expert = 29, qwen.seed = 71;
  test_support::RandomModelSpec mixtral;
  mixtral.n_experts = 4, mixtral.n_experts_used = 2, mixtral.d_model = 64, mixtral.n_heads = 4;
  mixtral.n_kv_heads = 2, mixtral.d_ff = 96, mixtral.dtype = DType::Q8_0, mixtral.seed = 72;
  // gpt-oss: sinks, biases, window 8 in the even layers (prompts and outputs run past it), YaRN,
  // top-k-then-softmax routing with clamped SwiGLU experts.
  test_support::RandomModelSpec gpt_oss;
  gpt_oss.architecture = "gpt-oss", gpt_oss.d_model = 40, gpt_oss.head_size = 12, gpt_oss.n_heads = 4;
  gpt_oss.n_kv_heads = 2, gpt_oss.n_layers = 3, gpt_oss.n_experts = 5, gpt_oss.n_experts_used = 2;
  gpt_oss.d_ff_expert = 29, gpt_oss.sliding_window = 8, gpt_oss.yarn_factor = 4.0, gpt_oss.yarn_original = 32;
  gpt_oss.seed = 73;
  for (test_support::RandomModelSpec spec : {qwen, mixtral, gpt_oss}) {
    spec.vocab_size = kVocab, spec.context_length = 128;
    test_support::TempDir dir;
    const std::string path = dir.file("moe.gguf");
    test_support::write_random_model(spec, path);
    const auto model = load_model(path);
    const Tokenizer tokenizer = load_tokenizer(testing::shared_path(kGpt2Vocab), "", kVocab);

    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> id(0, kVocab - 1);
    std::vector<std::vector<int32_t>> prompts;
    for (int length : {1, 5, 19, 11, 19}) {
      prompts.emplace_back();
      for (int i = 0; i < length; ++i) prompts.back().push_back(id(rng));
    }
    prompts[4] = prompts[2];  // the same tokens, side by side: the same experts in one step
    const int64_t max_tokens = 12;
    std::vector<std::vector<int32_t>> alone;
    for (const std::vector<int32_t>& prompt : prompts) alone.push_back(greedy_alone(model, prompt, max_tokens));

    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      EngineConfig config;
      config.max_seqs = 4;          // the fifth request waits for a slot
      config.max_batch_tokens = 7;  // prompts prefilled in chunks, next to others' decode tokens
      config.block_size = 4;
      config.kv_types = kDefaultKvTypes;
      Engine engine(model, tokenizer, config, pool);
      std::vector<std::vector<int32_t>> outputs(prompts.size());
      for (size_t i = 0; i < prompts.size(); ++i) {
        GenerationParams params;
        params.sampling.temperature = 0.0f;
        params.max_tokens = max_tokens;
        params.ignore_eos = true;
        engine.submit(prompts[i], params, [&outputs, i](RequestEvent&& event) {
          outputs[i].insert(outputs[i].end(), event.tokens.begin(), event.tokens.end());
        });
      }
      engine.run_until_idle();
      EXPECT_EQ(engine.stats().blocks.used, 0) << "leaked KV blocks";
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(outputs[i], alone[i]) << spec.architecture << ", prompt " << i << ", " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace tandem
