// KV blocks computed by one engine and generated from by another (disaggregated serving's two
// halves, without MPI): a prefill-only request (GenerationParams::kv_export) hands each full
// block of its prompt to a sink once, in order, as soon as it is computed, and samples nothing;
// a request submitted with a KvImport says which blocks it still needs (none that its engine
// had cached), collects and applies the arriving ones, and then generates exactly what a single
// engine generates for the same request (seeded sampling, chunked, batched with others). Bad
// blocks, failures and cancellations end the request and leave no block in use.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kv/block_allocator.h"
#include "kv/kv_block_message.h"
#include "model/model.h"
#include "support/engine_greedy.h"
#include "support/random_model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

constexpr const char* kGpt2Vocab = "tokenizers/llama.cpp-vocab/ggml-vocab-gpt-2.gguf";
constexpr int64_t kVocab = 50257;
constexpr int32_t kBlock = 4;

std::shared_ptr<const Model> gqa_model(DType dtype) {
  test_support::TempDir dir;
  test_support::RandomModelSpec spec;
  spec.d_model = 64, spec.n_heads = 4, spec.n_kv_heads = 2, spec.n_layers = 3, spec.d_ff = 96;  // Q8_0 rows: 32s
  spec.vocab_size = kVocab, spec.context_length = 96, spec.seed = 17, spec.dtype = dtype;
  const std::string path = dir.file("gqa.gguf");
  test_support::write_random_model(spec, path);
  return load_model(path);
}

// Blocks as the sink saw them: packed messages in the order handed over.
struct CollectingSink final : KvBlockSink {
  void block_computed(const KvCache& cache, int32_t physical_block, int64_t block_index, uint64_t parent_hash,
                      std::span<const int32_t> tokens) override {
    indices.push_back(block_index);
    messages.emplace_back();
    pack_kv_block(cache, physical_block, block_index, parent_hash, tokens, messages.back());
  }
  std::vector<int64_t> indices;
  std::deque<std::vector<uint8_t>> messages;
};

EngineConfig small_config() {
  EngineConfig config;
  config.max_seqs = 3;
  config.max_batch_tokens = 7;  // prompts in several chunks, next to other requests' decodes
  config.block_size = kBlock;
  return config;
}

GenerationParams sampled(uint64_t seed, int64_t max_tokens) {
  GenerationParams params;
  params.sampling.temperature = 0.9f;
  params.sampling.seed = seed;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  return params;
}

// One request's path through the two engines, as src/dist drives it over MPI.
struct Transfer {
  std::vector<int32_t> prompt;
  std::shared_ptr<KvImport> import;
  std::shared_ptr<CollectingSink> sink = std::make_shared<CollectingSink>();
  int64_t first_needed = -1;
  bool prefill_done = false;
  std::vector<int32_t> tokens;
  RequestEvent final_event;
  bool finished = false;
};

class KvTransferEngine : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    TANDEM_REQUIRE_SHARED(kGpt2Vocab);
    model_ = gqa_model(GetParam());
    tokenizer_ = std::make_unique<Tokenizer>(load_tokenizer(testing::shared_path(kGpt2Vocab), "", kVocab));
  }

  // Submits every transfer to `decode` (importing) and runs both engines until all finished.
  void run_disaggregated(Engine& prefill, Engine& decode, std::vector<Transfer>& transfers, int64_t max_tokens) {
    for (size_t i = 0; i < transfers.size(); ++i) {
      Transfer& t = transfers[i];
      const auto n_blocks = static_cast<int64_t>(t.prompt.size() - 1) / kBlock;
      t.import = std::make_shared<KvImport>(n_blocks, [&t, &prefill, n_blocks](int64_t first_needed) {
        t.first_needed = first_needed;
        if (first_needed >= n_blocks) {
          t.prefill_done = true;
          t.import->complete();
          return;
        }
        GenerationParams job;
        job.max_tokens = 1;
        job.kv_export = t.sink;
        job.kv_export_first_block = first_needed;
        prefill.submit(std::vector<int32_t>(t.prompt.begin(), t.prompt.begin() + n_blocks * kBlock), job,
                       [&t](RequestEvent&& event) {
                         EXPECT_TRUE(event.tokens.empty()) << "a prefill-only request samples nothing";
                         if (event.finished) {
                           EXPECT_EQ(event.finish_reason, FinishReason::Length);
                           t.prefill_done = true;
                         }
                       });
      });
      decode.submit_imported(
          t.prompt, sampled(100 + i, max_tokens),
          [&t](RequestEvent&& event) {
            t.tokens.insert(t.tokens.end(), event.tokens.begin(), event.tokens.end());
            if (event.finished) {
              t.finished = true;
              t.final_event = std::move(event);
            }
          },
          t.import);
    }
    for (int guard = 0; guard < 10000; ++guard) {
      decode.step();
      prefill.step();
      for (Transfer& t : transfers) {
        while (!t.sink->messages.empty()) {  // blocks "arrive" as soon as they were computed
          t.import->add(std::move(t.sink->messages.front()));
          t.sink->messages.pop_front();
        }
        if (t.prefill_done && !t.finished) t.import->complete();
      }
      if (std::all_of(transfers.begin(), transfers.end(), [](const Transfer& t) { return t.finished; })) return;
    }
    FAIL() << "the transfers did not finish";
  }

  std::vector<std::vector<int32_t>> single_engine(const std::vector<std::vector<int32_t>>& prompts,
                                                  int64_t max_tokens) {
    ThreadPool pool(2);
    Engine engine(model_, *tokenizer_, small_config(), pool);
    std::vector<std::vector<int32_t>> outputs(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i)
      engine.submit(prompts[i], sampled(100 + i, max_tokens), [&outputs, i](RequestEvent&& event) {
        outputs[i].insert(outputs[i].end(), event.tokens.begin(), event.tokens.end());
      });
    engine.run_until_idle();
    return outputs;
  }

  std::shared_ptr<const Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(KvTransferEngine, ImportedPromptsGenerateWhatOneEngineGenerates) {
  const auto prompts = test_support::random_prompts(5, kVocab, {5, 17, 33, 40, 4});
  const int64_t max_tokens = 12;
  const std::vector<std::vector<int32_t>> want = single_engine(prompts, max_tokens);
  ThreadPool pool(2);
  Engine prefill(model_, *tokenizer_, small_config(), pool);
  Engine decode(model_, *tokenizer_, small_config(), pool);
  for (int round = 0; round < 2; ++round) {
    std::vector<Transfer> transfers(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) transfers[i].prompt = prompts[i];
    run_disaggregated(prefill, decode, transfers, max_tokens);
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Transfer& t = transfers[i];
      const auto n_blocks = static_cast<int64_t>(prompts[i].size() - 1) / kBlock;
      EXPECT_EQ(t.tokens, want[i]) << "round " << round << " prompt " << i;
      EXPECT_EQ(t.final_event.finish_reason, FinishReason::Length);
      // Round 0: every block came from the prefill engine, none from the decode engine's
      // cache; round 1: the decode engine has them all and asks for none.
      EXPECT_EQ(t.first_needed, round == 0 ? 0 : n_blocks) << "round " << round << " prompt " << i;
      EXPECT_EQ(t.final_event.cached_tokens, round == 0 ? 0 : n_blocks * kBlock) << "prompt " << i;
      const int64_t sent = round == 0 ? n_blocks : 0;
      ASSERT_EQ(static_cast<int64_t>(t.sink->indices.size()), sent) << "prompt " << i;
      for (int64_t b = 0; b < sent; ++b) EXPECT_EQ(t.sink->indices[static_cast<size_t>(b)], b) << "in order, once";
      const int64_t message_bytes =
          kv_block_message_bytes(KvCache(model_->kv_shape(), 1, kBlock, kDefaultKvTypes), kBlock);
      EXPECT_EQ(t.final_event.kv_transfer_bytes, sent * message_bytes) << "prompt " << i;
    }
    EXPECT_EQ(decode.stats().blocks.used, 0) << "leaked KV blocks in the decode engine, round " << round;
    EXPECT_EQ(prefill.stats().blocks.used, 0) << "leaked KV blocks in the prefill engine, round " << round;
  }
}

// The prefill side's export alone: a prompt already in its prefix cache is exported again
// (from the cache), blocks before kv_export_first_block are not, and a partial last block
// never is.
TEST_P(KvTransferEngine, PrefillOnlyExportsTheAskedFullBlocksOnce) {
  ThreadPool pool(2);
  Engine prefill(model_, *tokenizer_, small_config(), pool);
  const std::vector<int32_t> prompt = test_support::random_prompts(8, kVocab, {22})[0];  // 5 full blocks + 2
  for (const int64_t first : {0, 2, 0}) {
    auto sink = std::make_shared<CollectingSink>();
    GenerationParams job;
    job.max_tokens = 1;
    job.kv_export = sink;
    job.kv_export_first_block = first;
    int64_t cached = -1;
    prefill.submit(prompt, job, [&](RequestEvent&& event) {
      EXPECT_TRUE(event.tokens.empty());
      if (event.finished) cached = event.cached_tokens;
    });
    prefill.run_until_idle();
    std::vector<int64_t> want;
    for (int64_t b = first; b < 5; ++b) want.push_back(b);
    EXPECT_EQ(sink->indices, want) << "first " << first;
    EXPECT_GE(cached, 0);
    // Each message carries the prompt's tokens of its block (the receiver checks the hash).
    KvCache receiver(model_->kv_shape(), 1, kBlock, kDefaultKvTypes);
    for (size_t m = 0; m < sink->messages.size(); ++m) {
      const KvBlockInfo info = read_kv_block_info(sink->messages[m], receiver);
      EXPECT_EQ(info.tokens,
                std::vector<int32_t>(prompt.begin() + (first + m) * kBlock, prompt.begin() + (first + m + 1) * kBlock));
    }
  }
  EXPECT_EQ(prefill.stats().blocks.used, 0);
}

TEST_P(KvTransferEngine, BadBlocksFailuresAndCancellationsEndTheRequest) {
  ThreadPool pool(2);
  Engine prefill(model_, *tokenizer_, small_config(), pool);
  Engine decode(model_, *tokenizer_, small_config(), pool);
  const auto prompts = test_support::random_prompts(11, kVocab, {13, 13, 13});
  // Blocks of another prompt: refused (they would put wrong K/V behind this prompt's hashes).
  auto other_sink = std::make_shared<CollectingSink>();
  GenerationParams job;
  job.max_tokens = 1;
  job.kv_export = other_sink;
  prefill.submit(std::vector<int32_t>(prompts[1].begin(), prompts[1].begin() + 12), job, [](RequestEvent&&) {});
  prefill.run_until_idle();
  ASSERT_EQ(other_sink->messages.size(), 3u);

  std::vector<RequestEvent> finals(3);
  std::vector<std::shared_ptr<KvImport>> imports;
  for (size_t i = 0; i < 3; ++i) {
    imports.push_back(std::make_shared<KvImport>(3, [](int64_t) {}));
    decode.submit_imported(
        prompts[i], sampled(1, 5),
        [&finals, i](RequestEvent&& event) {
          if (event.finished) finals[i] = std::move(event);
        },
        imports.back());
  }
  decode.step();                             // asks for their blocks
  imports[0]->add(other_sink->messages[0]);  // prompt 1's block for prompt 0
  imports[1]->fail("the prefill rank is gone");
  decode.cancel(3);
  decode.run_until_idle();
  EXPECT_EQ(finals[0].finish_reason, FinishReason::Error);
  EXPECT_NE(finals[0].error.find("other tokens"), std::string::npos) << finals[0].error;
  EXPECT_EQ(finals[1].finish_reason, FinishReason::Error);
  EXPECT_EQ(finals[1].error, "the prefill rank is gone");
  EXPECT_EQ(finals[2].finish_reason, FinishReason::Cancelled);
  EXPECT_TRUE(finals[2].tokens.empty());
  EXPECT_EQ(decode.stats().blocks.used, 0) << "leaked KV blocks";
  EXPECT_EQ(decode.stats().waiting, 0);

  // Complete with fewer blocks than it asked for: an error, not a hang or a wrong output.
  auto short_import = std::make_shared<KvImport>(3, [](int64_t) {});
  RequestEvent short_final;
  decode.submit_imported(
      prompts[2], sampled(1, 5), [&](RequestEvent&& event) { short_final = std::move(event); }, short_import);
  decode.step();
  short_import->complete();
  decode.run_until_idle();
  EXPECT_EQ(short_final.finish_reason, FinishReason::Error);
  EXPECT_NE(short_final.error.find("too few blocks"), std::string::npos) << short_final.error;
  EXPECT_EQ(decode.stats().blocks.used, 0);
}

TEST_P(KvTransferEngine, ImportsTheLastPositionNever) {
  ThreadPool pool(2);
  Engine decode(model_, *tokenizer_, small_config(), pool);
  const std::vector<int32_t> prompt = test_support::random_prompts(12, kVocab, {8})[0];
  // 8 positions are 2 blocks, but the last position must be computed here: 1 block at most.
  EXPECT_THROW(decode.submit_imported(
                   prompt, sampled(1, 4), [](RequestEvent&&) {}, std::make_shared<KvImport>(2, [](int64_t) {})),
               InputError);
}

INSTANTIATE_TEST_SUITE_P(Types, KvTransferEngine, ::testing::Values(DType::F32, DType::Q8_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tandem
