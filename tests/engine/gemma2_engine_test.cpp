// Gemma 2 through the engine: a random gemma2 model (tests/support's writer; test-gemma2's
// shape — d_model 64, 4 layers with layers 0 and 2 local, 4 heads of 32 over 2 KV heads, tied
// head — but a window of 8 that the requests pass several times, d_ff 100 so GeGLU rows end in
// a vector tail, and caps that bend: attention 2, final logits 3, as the forward tests'
// scores of order 1 need) with the GPT-2 vocabulary from ../shared. Requests of different
// lengths run together in chunked batches get, token for token, the greedy ids of the plain
// loop, and, bit for bit, the logprobs the engine reports for each request run alone (its
// prompt chunked differently, no other rows beside it); on one thread and two; no KV block
// is left in use.
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

EngineConfig chunked_config() {
  EngineConfig config;
  config.max_seqs = 3;          // the fourth request waits for a slot
  config.max_batch_tokens = 7;  // prompts prefilled in chunks, next to others' decode tokens
  config.block_size = 4;
  return config;
}

void expect_same_logprobs(const std::vector<TokenLogprob>& alone, const std::vector<TokenLogprob>& batched,
                          const std::string& what) {
  ASSERT_EQ(alone.size(), batched.size()) << what;
  for (size_t t = 0; t < alone.size(); ++t) {
    EXPECT_EQ(alone[t].chosen.token, batched[t].chosen.token) << what << " token " << t;
    EXPECT_EQ(alone[t].chosen.logprob, batched[t].chosen.logprob) << what << " token " << t;
    ASSERT_EQ(alone[t].top.size(), batched[t].top.size()) << what << " token " << t;
    for (size_t k = 0; k < alone[t].top.size(); ++k) {
      EXPECT_EQ(alone[t].top[k].token, batched[t].top[k].token) << what << " token " << t << " top " << k;
      EXPECT_EQ(alone[t].top[k].logprob, batched[t].top[k].logprob) << what << " token " << t << " top " << k;
    }
  }
}

TEST(Gemma2Engine, BatchedChunkedRequestsEqualEachAlone) {
  TANDEM_REQUIRE_SHARED(kGpt2Vocab);
  test_support::TempDir dir;
  test_support::RandomModelSpec spec;
  spec.architecture = "gemma2", spec.d_model = 64, spec.n_layers = 4, spec.n_heads = 4, spec.n_kv_heads = 2;
  spec.head_size = 32, spec.d_ff = 100, spec.sliding_window = 8, spec.tied_output = true, spec.rms_norm_eps = 1e-6f;
  spec.attn_logit_softcap = 2.0f, spec.final_logit_softcap = 3.0f;
  spec.vocab_size = kVocab, spec.context_length = 128, spec.seed = 81;
  const std::string path = dir.file("gemma2.gguf");
  test_support::write_random_model(spec, path);
  const auto model = load_model(path);
  ASSERT_GT(model->config.attn_logit_softcap, 0.0f);
  ASSERT_GT(model->config.final_logit_softcap, 0.0f);
  const Tokenizer tokenizer = load_tokenizer(testing::shared_path(kGpt2Vocab), "", kVocab);

  const auto prompts = test_support::random_prompts(11, kVocab, {2, 23, 9, 30});
  const int64_t max_tokens = 14, top_logprobs = 4;
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    std::vector<std::vector<TokenLogprob>> alone;
    for (const std::vector<int32_t>& prompt : prompts) {
      Engine engine(model, tokenizer, chunked_config(), pool);
      alone.push_back(test_support::run_greedy(engine, {prompt}, max_tokens, top_logprobs).logprobs[0]);
    }
    Engine engine(model, tokenizer, chunked_config(), pool);
    const test_support::GreedyOutputs batched = test_support::run_greedy(engine, prompts, max_tokens, top_logprobs);
    EXPECT_EQ(engine.stats().blocks.used, 0) << "leaked KV blocks";
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string what = "prompt " + std::to_string(i) + ", " + std::to_string(threads) + " threads";
      EXPECT_EQ(batched.tokens[i], test_support::greedy_alone(model, prompts[i], max_tokens, pool, kDefaultKvTypes))
          << what;
      ASSERT_EQ(static_cast<int64_t>(alone[i].size()), max_tokens) << what;
      ASSERT_EQ(static_cast<int64_t>(alone[i][0].top.size()), top_logprobs) << what;
      expect_same_logprobs(alone[i], batched.logprobs[i], what);
    }
  }
}

}  // namespace
}  // namespace tandem
