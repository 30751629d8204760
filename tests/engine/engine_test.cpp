// Engine end to end on aidreams260K: greedy outputs of requests run together equal each one
// run alone (and llama2.c's reference, which `tandem run --ids` reproduces) — batched, with
// tiny chunks, with prefix-cache hits, and with a pool so small that preemption happens.
// Also stop strings, cancellation and seeded sampling. Every run ends with no block in use.
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "engine/engine.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

const std::string kModel = testing::shared_path(testing::kAidreamsGguf);
const std::string kReference = testing::shared_path("models/aidreams260K/greedy-reference.jsonl");

#define REQUIRE_MODEL() TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf)

struct Fixture {
  std::shared_ptr<const Model> model = load_model(kModel);
  Tokenizer tokenizer = load_tokenizer(kModel, "", model->config.vocab_size);
  ThreadPool pool{2};
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

struct Outcome {
  std::vector<int32_t> ids;  // generated
  std::string text;
  FinishReason reason = FinishReason::None;
  int64_t cached_tokens = -1;
  int events = 0;
};

struct Job {
  std::string prompt;
  GenerationParams params;
};

GenerationParams greedy(int64_t max_tokens) {
  GenerationParams p;
  p.sampling.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

// Submits every job at once (or one after another), runs the engine, returns outcomes in order.
std::vector<Outcome> run_jobs(const std::vector<Job>& jobs, EngineConfig config, bool one_at_a_time = false,
                              EngineStats* stats_out = nullptr) {
  Fixture& f = fixture();
  Engine engine(f.model, f.tokenizer, config, f.pool);
  std::vector<Outcome> outcomes(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    Outcome& out = outcomes[i];
    engine.submit(f.tokenizer.encode(jobs[i].prompt, true), jobs[i].params, [&out](RequestEvent&& e) {
      ++out.events;
      out.ids.insert(out.ids.end(), e.tokens.begin(), e.tokens.end());
      out.text += e.text;
      if (e.finished) {
        out.reason = e.finish_reason;
        out.cached_tokens = e.cached_tokens;
        EXPECT_EQ(e.completion_tokens, static_cast<int64_t>(out.ids.size()));
      }
    });
    if (one_at_a_time) engine.run_until_idle();
  }
  engine.run_until_idle();
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.blocks.used, 0) << "leaked KV blocks";
  EXPECT_EQ(stats.blocks.free + stats.blocks.cached, stats.blocks.total);
  EXPECT_EQ(stats.running + stats.waiting, 0);
  if (stats_out) *stats_out = stats;
  return outcomes;
}

// The plain single-sequence loop, written here as the reference the engine is held to: the
// whole prompt in one forward pass, then one token per pass, all on a KV pool of its own,
// greedy through the same Sampler; stops at EOS, max_tokens or the context. K/V stored as `types`.
std::vector<int32_t> alone(const std::string& prompt, int64_t max_tokens, const KvTypes& types = kDefaultKvTypes) {
  using Key = std::tuple<std::string, int64_t, DType, DType>;
  static std::map<Key, std::vector<int32_t>> memo;  // references are pure
  const Key key{prompt, max_tokens, types.k, types.v};
  if (const auto it = memo.find(key); it != memo.end()) return it->second;
  Fixture& f = fixture();
  const int64_t context = f.model->config.context_length;
  std::vector<int32_t> tokens = f.tokenizer.encode(prompt, true);
  const auto n_prompt = static_cast<int64_t>(tokens.size());
  Forward forward(f.model, n_prompt, f.pool);
  KvCache cache(f.model->config.kv_shape(), context, 1, types);
  SamplingParams sampling;
  sampling.temperature = 0.0f;
  Sampler sampler(sampling, f.model->config.vocab_size);
  Batch batch;
  batch.add_sequence(cache.whole_pool_blocks());
  for (int64_t i = 0; i < n_prompt; ++i) batch.add(tokens[i], static_cast<int32_t>(i), 0, i == n_prompt - 1);
  std::vector<int32_t> generated;
  for (;;) {
    const int32_t next = sampler.sample(forward.run(batch, cache), tokens);
    tokens.push_back(next);
    generated.push_back(next);
    if (next == f.tokenizer.vocab().eos_id || static_cast<int64_t>(generated.size()) >= max_tokens ||
        static_cast<int64_t>(tokens.size()) > context)
      break;
    batch.clear();
    batch.add_sequence(cache.whole_pool_blocks());
    batch.add(next, static_cast<int32_t>(tokens.size() - 1), 0, true);
  }
  return memo[key] = generated;
}

std::vector<Job> mixed_jobs() {
  const char* prompts[] = {"The dream",
                           "I see",
                           "Echoes of light",
                           "",
                           "Classification whispers secrets, a gentle hum",
                           "Contrast edges sharpen",
                           "A",
                           "The dream align, as I seep into the void. Contrast"};
  std::vector<Job> jobs;
  int64_t max_tokens = 20;
  for (const char* p : prompts) {
    jobs.push_back({p, greedy(max_tokens)});
    max_tokens += 13;
  }
  jobs.push_back({"The dream", greedy(1000)});  // runs into the context limit
  return jobs;
}

void expect_matches_alone(const std::vector<Job>& jobs, const std::vector<Outcome>& outcomes,
                          const KvTypes& types = kDefaultKvTypes) {
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(outcomes[i].ids, alone(jobs[i].prompt, jobs[i].params.max_tokens, types))
        << "prompt '" << jobs[i].prompt << "', " << kv_types_description(types);
    EXPECT_NE(outcomes[i].reason, FinishReason::None);
  }
}

TEST(Engine, ConcurrentGreedyEqualsLlama2cReference) {
  REQUIRE_MODEL();
  std::vector<Job> jobs;
  std::vector<std::vector<int32_t>> expected;
  std::ifstream file(kReference);
  for (std::string line; std::getline(file, line);) {
    if (line.empty()) continue;
    const nlohmann::json entry = nlohmann::json::parse(line);
    jobs.push_back({entry.at("prompt").get<std::string>(), greedy(1000)});
    expected.push_back(entry.at("ids").get<std::vector<int32_t>>());
  }
  ASSERT_FALSE(jobs.empty());
  EngineConfig config;
  config.kv_types = {DType::F32, DType::F32};  // llama2.c's run.c keeps its KV cache in f32
  const std::vector<Outcome> outcomes = run_jobs(jobs, config);
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::vector<int32_t> full = fixture().tokenizer.encode(jobs[i].prompt, true);
    full.insert(full.end(), outcomes[i].ids.begin(), outcomes[i].ids.end());
    EXPECT_EQ(full, expected[i]) << "prompt '" << jobs[i].prompt << "'";
    EXPECT_EQ(outcomes[i].reason, FinishReason::ContextLimit);
  }
}

// The KV types aidreams260K's head size (16) allows; the block types are held to the same
// invariance on a model with heads of 32 (tests/model/kv_types_forward_test.cpp).
const KvTypes kAidreamsKvTypes[] = {
    {DType::F32, DType::F32}, {DType::F16, DType::F16}, {DType::BF16, DType::BF16}, {DType::F32, DType::F16}};

TEST(Engine, BatchedEqualsAlone) {
  REQUIRE_MODEL();
  const std::vector<Job> jobs = mixed_jobs();
  for (const KvTypes& types : kAidreamsKvTypes) {
    EngineConfig config;
    config.max_seqs = 8;
    config.kv_types = types;
    expect_matches_alone(jobs, run_jobs(jobs, config), types);
  }
}

TEST(Engine, ChunkedPrefillEqualsAlone) {
  REQUIRE_MODEL();
  const std::vector<Job> jobs = mixed_jobs();
  for (const KvTypes& types : kAidreamsKvTypes) {
    EngineConfig config;
    config.max_seqs = 4;
    config.max_batch_tokens = 5;
    config.block_size = 4;
    config.kv_types = types;
    expect_matches_alone(jobs, run_jobs(jobs, config), types);
  }
}

TEST(Engine, BlockKvTypesNeedHeadsOfWholeBlocks) {
  REQUIRE_MODEL();
  EngineConfig config;
  config.kv_types = {DType::Q8_0, DType::F16};  // aidreams260K's heads are 16 wide
  EXPECT_THROW(run_jobs({{"A", greedy(2)}}, config), InputError);
}

TEST(Engine, PrefixCacheHitsGiveIdenticalOutput) {
  REQUIRE_MODEL();
  const std::string shared = "The dream align, as I seep into the void. Classification whispers secrets";
  std::vector<Job> jobs = {
      {shared, greedy(30)}, {shared, greedy(30)}, {shared + ", a gentle", greedy(25)}, {shared + " hum", greedy(40)}};
  EngineConfig config;
  config.block_size = 8;
  EngineStats stats;
  const std::vector<Outcome> outcomes = run_jobs(jobs, config, /*one_at_a_time=*/true, &stats);
  expect_matches_alone(jobs, outcomes);
  EXPECT_EQ(outcomes[0].cached_tokens, 0);
  for (size_t i = 1; i < jobs.size(); ++i) EXPECT_GE(outcomes[i].cached_tokens, 8) << i;
  EXPECT_GT(stats.blocks.hit_tokens, 0);
}

TEST(Engine, TinyPoolPreemptsAndStillMatchesAlone) {
  REQUIRE_MODEL();
  std::vector<Job> jobs;
  for (const char* p : {"The dream", "I see", "Echoes of light", "Contrast", "A"}) jobs.push_back({p, greedy(110)});
  EngineConfig config;
  config.max_seqs = 5;
  config.block_size = 16;
  config.kv_memory_bytes = 1;  // below one context: rejected
  EXPECT_THROW(run_jobs(jobs, config), InputError);
  // Exactly one full context (128 tokens = 8 blocks) for five long sequences.
  const ModelConfig& c = fixture().model->config;
  config.kv_memory_bytes = 8 * 16 * KvCache::bytes_per_token(c.kv_shape(), config.kv_types);
  EngineStats stats;
  const std::vector<Outcome> outcomes = run_jobs(jobs, config, false, &stats);
  EXPECT_GT(stats.preemptions, 0);
  expect_matches_alone(jobs, outcomes);
}

TEST(Engine, SeededSamplingIsBatchInvariant) {
  REQUIRE_MODEL();
  std::vector<Job> jobs;
  for (int i = 0; i < 4; ++i) {
    GenerationParams p;
    p.sampling.temperature = 0.9f;
    p.sampling.seed = 100 + i;
    p.sampling.presence_penalty = 0.3f;
    p.max_tokens = 40;
    jobs.push_back({i % 2 ? "I see" : "The dream", p});
  }
  const std::vector<Outcome> together = run_jobs(jobs, EngineConfig{});
  const std::vector<Outcome> apart = run_jobs(jobs, EngineConfig{}, true);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(together[i].ids, apart[i].ids);
}

TEST(Engine, StopStringsEndTheTextAndAreNeverEmitted) {
  REQUIRE_MODEL();
  Fixture& f = fixture();
  const std::vector<int32_t> ids = alone("The dream", 60);
  std::vector<int32_t> all = f.tokenizer.encode("The dream", true);
  const size_t prompt_chars = f.tokenizer.decode(all).size();
  all.insert(all.end(), ids.begin(), ids.end());
  const std::string full = f.tokenizer.decode(all).substr(prompt_chars);
  // A stop string that straddles token boundaries, and one that never occurs.
  const size_t at = full.find("whispers");
  ASSERT_NE(at, std::string::npos) << full;
  Job job{"The dream", greedy(60)};
  job.params.stop = {"zzz never", "ers sec"};
  const std::vector<Outcome> out = run_jobs({job}, EngineConfig{});
  EXPECT_EQ(out[0].text, full.substr(0, full.find("ers sec")));
  EXPECT_EQ(out[0].reason, FinishReason::StopString);

  Job no_stop{"The dream", greedy(60)};
  no_stop.params.stop = {"zzz never"};
  EXPECT_EQ(run_jobs({no_stop}, EngineConfig{})[0].text, full);
}

TEST(Engine, MinTokensHoldsBackEndTokensAndStopStrings) {
  // logit_bias +100 on EOS makes every step pick it; min_tokens makes the first steps pass it
  // over (the next most likely token instead), so exactly min_tokens tokens come before EOS.
  REQUIRE_MODEL();
  Fixture& f = fixture();
  const int32_t eos = f.tokenizer.vocab().eos_id;
  ASSERT_GE(eos, 0);
  Job forced{"The dream", greedy(20)};
  forced.params.sampling.logit_bias = {{eos, 100.0f}};
  const std::vector<Outcome> at_once = run_jobs({forced}, EngineConfig{});
  EXPECT_EQ(at_once[0].ids, std::vector<int32_t>{eos});
  EXPECT_EQ(at_once[0].reason, FinishReason::EndOfSequence);

  Job held = forced;
  held.params.min_tokens = 5;
  const std::vector<Outcome> out = run_jobs({held}, EngineConfig{});
  ASSERT_EQ(out[0].ids.size(), 6u);
  EXPECT_EQ(std::count(out[0].ids.begin(), out[0].ids.end(), eos), 1);
  EXPECT_EQ(out[0].ids.back(), eos);
  EXPECT_EQ(out[0].reason, FinishReason::EndOfSequence);
  // The five held-back tokens are plain greedy decoding's first five.
  const std::vector<int32_t> plain = alone("The dream", 5);
  EXPECT_EQ(std::vector<int32_t>(out[0].ids.begin(), out[0].ids.end() - 1), plain);

  // A stop string inside the first min_tokens tokens does not end the request.
  std::vector<int32_t> all = f.tokenizer.encode("The dream", true);
  const size_t prompt_chars = f.tokenizer.decode(all).size();
  all.insert(all.end(), plain.begin(), plain.end());
  const std::string first_text = f.tokenizer.decode(all).substr(prompt_chars);
  ASSERT_GE(first_text.size(), 2u);
  Job stopped{"The dream", greedy(10)};
  stopped.params.stop = {first_text.substr(0, 2)};
  EXPECT_EQ(run_jobs({stopped}, EngineConfig{})[0].reason, FinishReason::StopString);
  stopped.params.min_tokens = 10;
  const Outcome late = run_jobs({stopped}, EngineConfig{})[0];
  EXPECT_EQ(late.reason, FinishReason::Length);
  EXPECT_EQ(late.ids, alone("The dream", 10));
}

TEST(Engine, StopTokenIdsEndTheRequestLikeEosAndIgnoreEosDoesNot) {
  REQUIRE_MODEL();
  Fixture& f = fixture();
  const std::vector<int32_t> plain = alone("The dream", 12);
  ASSERT_GE(plain.size(), 4u);
  // The fourth greedy token as a stop token: the request ends there, its text not emitted.
  Job job{"The dream", greedy(12)};
  job.params.stop_token_ids = {plain[3]};
  const Outcome out = run_jobs({job}, EngineConfig{})[0];
  const auto first = std::find(plain.begin(), plain.end(), plain[3]);
  EXPECT_EQ(out.ids, std::vector<int32_t>(plain.begin(), first + 1));
  EXPECT_EQ(out.reason, FinishReason::EndOfSequence);
  std::vector<int32_t> shown = f.tokenizer.encode("The dream", true);
  const size_t prompt_chars = f.tokenizer.decode(shown).size();
  shown.insert(shown.end(), plain.begin(), first);
  EXPECT_EQ(out.text, f.tokenizer.decode(shown).substr(prompt_chars));
  // EOS forced by logit_bias but ignored: the request runs to max_tokens.
  Job ignoring{"The dream", greedy(7)};
  ignoring.params.sampling.logit_bias = {{f.tokenizer.vocab().eos_id, 100.0f}};
  ignoring.params.ignore_eos = true;
  const Outcome all_eos = run_jobs({ignoring}, EngineConfig{})[0];
  EXPECT_EQ(all_eos.ids, std::vector<int32_t>(7, f.tokenizer.vocab().eos_id));
  EXPECT_EQ(all_eos.reason, FinishReason::Length);
  // Bad extras are input errors.
  Engine engine(f.model, f.tokenizer, EngineConfig{}, f.pool);
  GenerationParams bad = greedy(5);
  bad.stop_token_ids = {100000};
  EXPECT_THROW(engine.submit({1, 5}, bad, {}), InputError);
  bad = greedy(5);
  bad.min_tokens = 6;
  EXPECT_THROW(engine.submit({1, 5}, bad, {}), InputError);
  bad = greedy(5);
  bad.sampling.logit_bias = {{100000, 1.0f}};
  EXPECT_THROW(engine.submit({1, 5}, bad, {}), InputError);
}

TEST(Engine, RejectsBadRequestsAlone) {
  REQUIRE_MODEL();
  Fixture& f = fixture();
  Engine engine(f.model, f.tokenizer, EngineConfig{}, f.pool);
  EXPECT_THROW(engine.submit({}, greedy(5), {}), InputError);
  EXPECT_THROW(engine.submit(std::vector<int32_t>(200, 5), greedy(5), {}), InputError);
  EXPECT_THROW(engine.submit({1, 5}, greedy(0), {}), InputError);
  EXPECT_THROW(engine.submit({1, 100000}, greedy(5), {}), InputError);
  GenerationParams bad = greedy(5);
  bad.sampling.repetition_penalty = -1.0f;
  EXPECT_THROW(engine.submit({1, 5}, bad, {}), InputError);
  EXPECT_EQ(engine.stats().waiting, 0);
}

TEST(Engine, CancellationFreesBlocksOnTheEngineThread) {
  REQUIRE_MODEL();
  Fixture& f = fixture();
  Engine engine(f.model, f.tokenizer, EngineConfig{}, f.pool);
  std::mutex mutex;
  std::condition_variable cv;
  std::map<uint64_t, FinishReason> finished;
  int tokens = 0;
  const auto on_event = [&](RequestEvent&& e) {
    std::lock_guard lock(mutex);
    ++tokens;
    if (e.finished) finished[e.request_id] = e.finish_reason;
    cv.notify_all();
  };
  engine.start();
  const uint64_t a = engine.submit(f.tokenizer.encode("The dream", true), greedy(100000), on_event);
  const uint64_t b = engine.submit(f.tokenizer.encode("I see", true), greedy(5), on_event);
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return finished.count(b) && tokens > 10; });
  }
  engine.cancel(a);
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return finished.count(a) > 0; });
  }
  EXPECT_EQ(finished[b], FinishReason::Length);
  EXPECT_TRUE(finished[a] == FinishReason::Cancelled || finished[a] == FinishReason::ContextLimit);
  engine.stop();
  EXPECT_EQ(engine.stats().blocks.used, 0);
}

TEST(Engine, CancelWaitingRefusesOnlyRequestsNeverAdmitted) {
  REQUIRE_MODEL();
  Fixture& f = fixture();
  EngineConfig config;
  config.max_seqs = 1;  // one lane: the second and third requests wait
  Engine engine(f.model, f.tokenizer, config, f.pool);
  std::map<uint64_t, RequestEvent> finals;
  const auto on_event = [&](RequestEvent&& e) {
    if (e.finished) finals[e.request_id] = std::move(e);
  };
  const uint64_t running = engine.submit(f.tokenizer.encode("The dream", true), greedy(20), on_event);
  ASSERT_TRUE(engine.step());  // admits `running` (stepped by hand: no race with the engine thread)
  const uint64_t queued_a = engine.submit(f.tokenizer.encode("I see", true), greedy(20), on_event);
  const uint64_t queued_b = engine.submit(f.tokenizer.encode("Echoes", true), greedy(20), on_event);
  engine.cancel_waiting();
  engine.run_until_idle();
  ASSERT_EQ(finals.size(), 3u);
  EXPECT_EQ(finals[running].finish_reason, FinishReason::Length);
  EXPECT_TRUE(finals[running].admitted);
  EXPECT_EQ(finals[running].completion_tokens, 20);
  for (uint64_t id : {queued_a, queued_b}) {
    EXPECT_EQ(finals[id].finish_reason, FinishReason::Cancelled) << id;
    EXPECT_FALSE(finals[id].admitted) << id;
    EXPECT_EQ(finals[id].completion_tokens, 0) << id;
  }
  EXPECT_EQ(engine.stats().blocks.used, 0);
}

}  // namespace
}  // namespace tandem
