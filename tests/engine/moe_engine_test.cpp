// Mixture-of-experts models through the engine: random qwen3moe, Mixtral-style llama and gpt-oss models
// (tests/support's writer) with the GPT-2 vocabulary from ../shared. Requests run together in
// chunked batches of a few tokens — some with the same prompt, so their tokens choose the same
// experts in the same step — give, token for token, the greedy ids each gets alone (the whole
// prompt in one forward pass, then a token per pass, on a KV pool of its own), on one thread
// and on two; no KV block is left in use.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "support/engine_greedy.h"
#include "support/random_model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

constexpr const char* kGpt2Vocab = "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
constexpr int64_t kVocab = 50257;  // the GPT-2 vocabulary's size

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

    auto prompts = test_support::random_prompts(7, kVocab, {1, 5, 19, 11, 19});
    prompts[4] = prompts[2];  // the same tokens, side by side: the same experts in one step
    const int64_t max_tokens = 12;
    // Alone on one thread, with the engine's cache types: K/V rounded the same way on both sides.
    ThreadPool one_thread(1);
    std::vector<std::vector<int32_t>> alone;
    for (const std::vector<int32_t>& prompt : prompts)
      alone.push_back(test_support::greedy_alone(model, prompt, max_tokens, one_thread, kDefaultKvTypes));

    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      EngineConfig config;
      config.max_seqs = 4;          // the fifth request waits for a slot
      config.max_batch_tokens = 7;  // prompts prefilled in chunks, next to others' decode tokens
      config.block_size = 4;
      config.kv_types = kDefaultKvTypes;
      Engine engine(model, tokenizer, config, pool);
      const test_support::GreedyOutputs outputs = test_support::run_greedy(engine, prompts, max_tokens);
      EXPECT_EQ(engine.stats().blocks.used, 0) << "leaked KV blocks";
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_EQ(outputs.tokens[i], alone[i])
            << spec.architecture << ", prompt " << i << ", " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace tandem
