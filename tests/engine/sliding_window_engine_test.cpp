// A sliding-window llama (window 6 on every layer) through the engine: requests run together
// in chunked batches give, token for token, the greedy ids of the plain loop on a pool that
// keeps every position, while the engine's pool holds only each sequence's window (far fewer
// blocks than their lengths need); run again, the same prompts reuse cached prefixes whose
// early blocks were dropped, with the same outputs; no block is left in use.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "support/engine_greedy.h"
#include "support/random_model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

constexpr const char* kGpt2Vocab = "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
constexpr int64_t kVocab = 50257;  // the GPT-2 vocabulary's size

// A random llama with a window of 6 on every layer and a 128-token context.
std::shared_ptr<const Model> sliding_model(uint32_t seed) {
  test_support::TempDir dir;
  test_support::RandomModelSpec spec;
  spec.d_model = 48, spec.n_heads = 4, spec.n_kv_heads = 2, spec.sliding_window = 6;
  spec.vocab_size = kVocab, spec.context_length = 128, spec.seed = seed;
  const std::string path = dir.file("sliding.gguf");
  test_support::write_random_model(spec, path);
  return load_model(path);
}

TEST(SlidingWindowEngine, KeepsOnlyTheWindowAndMatchesThePlainLoop) {
  TANDEM_REQUIRE_SHARED(kGpt2Vocab);
  const auto model = sliding_model(63);
  ASSERT_EQ(model->config.kv_window(), 6);
  const Tokenizer tokenizer = load_tokenizer(testing::shared_path(kGpt2Vocab), "", kVocab);
  ThreadPool pool(2);

  const auto prompts = test_support::random_prompts(9, kVocab, {3, 17, 30, 9});
  const int64_t max_tokens = 30;

  EngineConfig config;
  config.max_seqs = 3;
  config.max_batch_tokens = 6;
  config.block_size = 4;
  // Room for three full contexts (32 blocks each), as without a window: the pool a window
  // alone would size (4 blocks a sequence) keeps too little for the second round's prefix hits.
  config.kv_memory_bytes = 3 * 32 * 4 * KvCache::bytes_per_token(model->config.kv_shape(), config.kv_types);
  Engine engine(model, tokenizer, config, pool);
  for (int round = 0; round < 2; ++round) {
    int64_t most_used = 0;
    const test_support::GreedyOutputs outputs = test_support::run_greedy(
        engine, prompts, max_tokens, -1, [&] { most_used = std::max(most_used, engine.stats().blocks.used); });
    // Three sequences of up to 60 positions (15 blocks each) at once; each holds at most the
    // blocks of a window of 6 plus a chunk of 6, 4 blocks, once its prompt is in.
    EXPECT_LE(most_used, 3 * 8) << "round " << round;
    EXPECT_EQ(engine.stats().blocks.used, 0) << "leaked KV blocks";
    for (size_t i = 0; i < prompts.size(); ++i)
      EXPECT_EQ(outputs.tokens[i], test_support::greedy_alone(model, prompts[i], max_tokens, pool))
          << "round " << round << " prompt " << i;
    if (round == 1) {
      EXPECT_EQ(outputs.cached_tokens[2], 28)
          << "the 30-token prompt again: blocks inside the window of position 28 were cached";
    }
  }
}

// Prompts longer than the pool: with the window every layer has, the engine's default pool is
// --parallel sequences of the window plus one step (4 blocks of 4 each here, 8 in all, where a
// full 128-token context would need 32), and 100- and 90-token prompts still run side by side,
// taking their blocks a chunk at a time, with the plain loop's greedy ids.
TEST(SlidingWindowEngine, PromptsLongerThanThePoolRunAChunkAtATime) {
  TANDEM_REQUIRE_SHARED(kGpt2Vocab);
  const auto model = sliding_model(64);
  const Tokenizer tokenizer = load_tokenizer(testing::shared_path(kGpt2Vocab), "", kVocab);
  ThreadPool pool(2);

  const auto prompts = test_support::random_prompts(10, kVocab, {100, 90});
  const int64_t max_tokens = 12;
  EngineConfig config;
  config.max_seqs = 2;
  config.max_batch_tokens = 6;
  config.block_size = 4;
  Engine engine(model, tokenizer, config, pool);
  EXPECT_EQ(engine.stats().kv_pool.n_blocks, 8);
  int64_t most_running = 0;
  const test_support::GreedyOutputs outputs = test_support::run_greedy(
      engine, prompts, max_tokens, -1, [&] { most_running = std::max(most_running, engine.stats().running); });
  EXPECT_EQ(most_running, 2) << "both prompts in flight at once";
  EXPECT_EQ(engine.stats().blocks.used, 0) << "leaked KV blocks";
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(outputs.tokens[i], test_support::greedy_alone(model, prompts[i], max_tokens, pool)) << "prompt " << i;
}

}  // namespace
}  // namespace tandem
