// Qwen3 through the engine: a random qwen3 model (own head size, per-head Q/K norms, half-split
// RoPE; tests/support's writer) with the GPT-2 vocabulary from ../shared. Requests run together
// in chunked batches of a few tokens give, token for token, the greedy ids of the plain loop —
// the whole prompt in one forward pass, then a token per pass, on a KV pool of its own — and
// no KV block is left in use.
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

TEST(Qwen3Engine, BatchedChunkedRequestsEqualThePlainLoop) {
  TANDEM_REQUIRE_SHARED(kGpt2Vocab);
  test_support::TempDir dir;
  test_support::RandomModelSpec spec;
  spec.architecture = "qwen3", spec.head_size = 24, spec.n_heads = 4, spec.n_kv_heads = 2;
  spec.vocab_size = kVocab, spec.context_length = 128, spec.seed = 61;
  const std::string path = dir.file("qwen3.gguf");
  test_support::write_random_model(spec, path);
  const auto model = load_model(path);
  const Tokenizer tokenizer = load_tokenizer(testing::shared_path(kGpt2Vocab), "", kVocab);
  ThreadPool pool(2);

  const auto prompts = test_support::random_prompts(7, kVocab, {1, 5, 19, 11});
  const int64_t max_tokens = 12;

  EngineConfig config;
  config.max_seqs = 3;          // the fourth request waits for a slot
  config.max_batch_tokens = 6;  // prompts prefilled in chunks, next to others' decode tokens
  config.block_size = 4;
  Engine engine(model, tokenizer, config, pool);
  const test_support::GreedyOutputs outputs = test_support::run_greedy(engine, prompts, max_tokens);
  EXPECT_EQ(engine.stats().blocks.used, 0) << "leaked KV blocks";
  for (size_t i = 0; i < prompts.size(); ++i)
    EXPECT_EQ(outputs.tokens[i], test_support::greedy_alone(model, prompts[i], max_tokens, pool)) << "prompt " << i;
}

}  // namespace
}  // namespace tandem
