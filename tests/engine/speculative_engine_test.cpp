// Speculative decoding through the Engine: with prompt lookup on, greedy and seeded sampled
// outputs are token-identical to plain decoding — alone, batched with plain requests, with
// small KV blocks (rollbacks across block edges), prefix-cache hits and preemption — on
// aidreams260K (repetitive text: many proposals kept) and on random-weight F32 and Q8_0
// models (proposals mostly rejected). Every run ends with no KV block in use.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/engine.h"
#include "model/model.h"
#include "support/random_model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

const std::string kAidreams = testing::shared_path(testing::kAidreamsGguf);

struct Loaded {
  std::shared_ptr<const Model> model;
  Tokenizer tokenizer;
};

ThreadPool& pool() {
  static ThreadPool p{2};
  return p;
}

const Loaded& aidreams() {
  static const Loaded loaded = [] {
    std::shared_ptr<const Model> model = load_model(kAidreams);
    Tokenizer tokenizer = load_tokenizer(kAidreams, "", model->config.vocab_size);
    return Loaded{std::move(model), std::move(tokenizer)};
  }();
  return loaded;
}

// A random-weight model with aidreams260K's vocabulary size, so its tokenizer can serve.
const Loaded& random_model(DType dtype) {
  static std::map<DType, Loaded> models;
  if (const auto it = models.find(dtype); it != models.end()) return it->second;
  const Loaded& vocab_source = aidreams();
  test_support::RandomModelSpec spec;
  spec.d_model = 64;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.d_ff = 96;
  spec.vocab_size = vocab_source.model->config.vocab_size;
  spec.context_length = 192;
  spec.dtype = dtype;
  spec.seed = 11;
  const std::string path =
      (std::filesystem::temp_directory_path() /
       ("tandem_spec_random_" + std::to_string(static_cast<int>(dtype)) + "_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  test_support::write_random_model(spec, path);
  Loaded loaded{load_model(path), load_tokenizer(kAidreams, "", spec.vocab_size)};
  std::filesystem::remove(path);
  return models.emplace(dtype, std::move(loaded)).first->second;
}

struct Job {
  std::string prompt;
  GenerationParams params;
};

struct Outcome {
  std::vector<int32_t> ids;
  std::string text;
  FinishReason reason = FinishReason::None;
  int64_t drafted = 0, accepted = 0;
};

int64_t last_preemptions = 0;  // of the latest run_jobs

std::vector<Outcome> run_jobs(const Loaded& loaded, const std::vector<Job>& jobs, EngineConfig config,
                              bool one_at_a_time = false) {
  Engine engine(loaded.model, loaded.tokenizer, config, pool());
  std::vector<Outcome> outcomes(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    Outcome& out = outcomes[i];
    engine.submit(loaded.tokenizer.encode(jobs[i].prompt, true), jobs[i].params, [&out](RequestEvent&& e) {
      out.ids.insert(out.ids.end(), e.tokens.begin(), e.tokens.end());
      out.text += e.text;
      EXPECT_LE(e.accepted_tokens, e.drafted_tokens);
      if (e.finished) {
        out.reason = e.finish_reason;
        out.drafted = e.drafted_tokens;
        out.accepted = e.accepted_tokens;
        EXPECT_EQ(e.completion_tokens, static_cast<int64_t>(out.ids.size()));
      }
    });
    if (one_at_a_time) engine.run_until_idle();
  }
  engine.run_until_idle();
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.blocks.used, 0) << "leaked KV blocks";
  last_preemptions = stats.preemptions;
  int64_t drafted = 0, accepted = 0;
  for (const Outcome& o : outcomes) {
    drafted += o.drafted;
    accepted += o.accepted;
  }
  EXPECT_EQ(stats.drafted_tokens, drafted);
  EXPECT_EQ(stats.accepted_tokens, accepted);
  return outcomes;
}

SpeculationParams ngram(int32_t draft_max, int32_t ngram_min = 1, int32_t ngram_max = 3) {
  SpeculationParams s;
  s.type = SpeculationType::Ngram;
  s.draft_max = draft_max;
  s.ngram_min = ngram_min;
  s.ngram_max = ngram_max;
  return s;
}

GenerationParams greedy(int64_t max_tokens) {
  GenerationParams p;
  p.sampling.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

GenerationParams sampled(int64_t max_tokens, uint64_t seed) {
  GenerationParams p;
  p.sampling.temperature = 0.8f;
  p.sampling.top_k = 40;
  p.sampling.top_p = 0.95f;
  p.sampling.repetition_penalty = 1.1f;
  p.sampling.seed = seed;
  p.max_tokens = max_tokens;
  return p;
}

std::vector<Job> jobs_for(const std::vector<GenerationParams>& params) {
  const char* prompts[] = {"The dream", "I see", "Echoes of light", "A", "Contrast edges sharpen", "The dream align"};
  std::vector<Job> jobs;
  for (size_t i = 0; i < params.size(); ++i) jobs.push_back({prompts[i % std::size(prompts)], params[i]});
  return jobs;
}

// The same jobs with speculation on for those `speculate` selects.
std::vector<Job> speculating(std::vector<Job> jobs, const SpeculationParams& spec, bool every_other = false) {
  for (size_t i = 0; i < jobs.size(); ++i)
    if (!every_other || i % 2 == 0) jobs[i].params.speculation = spec;
  return jobs;
}

void expect_identical(const std::vector<Outcome>& plain, const std::vector<Outcome>& spec) {
  ASSERT_EQ(plain.size(), spec.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(spec[i].ids, plain[i].ids) << "job " << i;
    EXPECT_EQ(spec[i].text, plain[i].text) << "job " << i;
    EXPECT_EQ(spec[i].reason, plain[i].reason) << "job " << i;
  }
}

int64_t total_accepted(const std::vector<Outcome>& outcomes) {
  int64_t n = 0;
  for (const Outcome& o : outcomes) n += o.accepted;
  return n;
}

int64_t total_drafted(const std::vector<Outcome>& outcomes) {
  int64_t n = 0;
  for (const Outcome& o : outcomes) n += o.drafted;
  return n;
}

EngineConfig config(int32_t max_seqs, int32_t block_size, int64_t kv_memory_bytes = 0) {
  EngineConfig c;
  c.max_seqs = max_seqs;
  c.block_size = block_size;
  c.kv_memory_bytes = kv_memory_bytes;
  return c;
}

TEST(SpeculativeEngine, GreedyIsTokenIdenticalOnAidreams) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::vector<Job> plain_jobs = jobs_for({greedy(200), greedy(120), greedy(300), greedy(64), greedy(150)});
  const std::vector<Outcome> plain = run_jobs(aidreams(), plain_jobs, config(1, 16), true);
  // Alone, batched, and with 4-token blocks so rollbacks cross block edges; several lengths.
  for (int32_t draft_max : {1, 4, 8}) {
    const std::vector<Job> jobs = speculating(plain_jobs, ngram(draft_max));
    const std::vector<Outcome> alone = run_jobs(aidreams(), jobs, config(1, 16), true);
    expect_identical(plain, alone);
    EXPECT_GT(total_accepted(alone), total_drafted(alone) / 4) << "aidreams repeats itself: most proposals land";
    expect_identical(plain, run_jobs(aidreams(), jobs, config(4, 4)));
  }
}

TEST(SpeculativeEngine, MixedBatchWithPrefixHitsAndPreemptionIsTokenIdentical) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  std::vector<Job> plain_jobs = jobs_for({greedy(180), sampled(160, 3), greedy(90), sampled(200, 4), greedy(250)});
  plain_jobs.push_back({"The dream", greedy(400)});  // a prefix hit on the first job's prompt
  const std::vector<Outcome> plain = run_jobs(aidreams(), plain_jobs, config(1, 8), true);
  const std::vector<Job> mixed = speculating(plain_jobs, ngram(4), true);  // every other one speculates
  expect_identical(plain, run_jobs(aidreams(), mixed, config(4, 8)));
  // A pool of one context plus a little: sequences preempt each other mid-speculation.
  const int64_t context = aidreams().model->config.context_length;
  const int64_t per_block = KvCache::bytes_per_token(aidreams().model->config.kv_shape(), kDefaultKvTypes) * 8;
  const int64_t tight = (context / 8 + 6) * per_block;
  const std::vector<Outcome> pressed = run_jobs(aidreams(), speculating(plain_jobs, ngram(6)), config(4, 8, tight));
  EXPECT_GT(last_preemptions, 0);
  expect_identical(plain, pressed);
  EXPECT_GT(total_accepted(pressed), 0);
}

TEST(SpeculativeEngine, SeededSamplingIsTokenIdentical) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  std::vector<GenerationParams> params;
  for (uint64_t seed = 1; seed <= 6; ++seed) params.push_back(sampled(150, seed));
  const std::vector<Job> plain_jobs = jobs_for(params);
  const std::vector<Outcome> plain = run_jobs(aidreams(), plain_jobs, config(1, 16), true);
  const std::vector<Outcome> spec = run_jobs(aidreams(), speculating(plain_jobs, ngram(5, 2, 4)), config(3, 4));
  expect_identical(plain, spec);
  EXPECT_GT(total_accepted(spec), 0);
}

TEST(SpeculativeEngine, RandomModelsAreTokenIdentical) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);  // its tokenizer
  for (DType dtype : {DType::F32, DType::Q8_0}) {
    const Loaded& model = random_model(dtype);
    const std::vector<Job> plain_jobs =
        jobs_for({greedy(150), sampled(150, 9), greedy(100), sampled(120, 10), greedy(180)});
    const std::vector<Outcome> plain = run_jobs(model, plain_jobs, config(1, 16), true);
    const std::vector<Outcome> spec = run_jobs(model, speculating(plain_jobs, ngram(4, 1, 2)), config(5, 4));
    expect_identical(plain, spec);
    EXPECT_GT(total_drafted(spec), 0) << dtype_name(dtype);
  }
}

TEST(SpeculativeEngine, BadSpeculationOptionsAreInputErrors) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  Engine engine(aidreams().model, aidreams().tokenizer, config(1, 16), pool());
  const std::vector<int32_t> prompt = aidreams().tokenizer.encode("I see", true);
  GenerationParams p = greedy(8);
  p.speculation = ngram(4);
  p.speculation.draft_min = 5;
  EXPECT_THROW(engine.submit(prompt, p, nullptr), InputError);
  p.speculation = ngram(4, 3, 2);
  EXPECT_THROW(engine.submit(prompt, p, nullptr), InputError);
  p.speculation = ngram(kMaxDraftTokens + 1);
  EXPECT_THROW(engine.submit(prompt, p, nullptr), InputError);
  p.speculation = ngram(4);
  p.speculation.type = SpeculationType::Draft;  // this engine has no draft model
  EXPECT_THROW(engine.submit(prompt, p, nullptr), InputError);
  EXPECT_THROW(speculation_type_from_name("magic"), InputError);
  EXPECT_EQ(speculation_type_from_name("ngram"), SpeculationType::Ngram);
  EXPECT_EQ(speculation_type_from_name("draft"), SpeculationType::Draft);
}

SpeculationParams draft(int32_t draft_max) {
  SpeculationParams s;
  s.type = SpeculationType::Draft;
  s.draft_max = draft_max;
  return s;
}

EngineConfig with_draft(EngineConfig c, const Loaded& draft_model) {
  c.draft_model = draft_model.model;
  c.draft_tokenizer = &draft_model.tokenizer;
  return c;
}

TEST(SpeculativeEngine, DraftModelGreedyIsTokenIdentical) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const std::vector<Job> plain_jobs = jobs_for({greedy(150), greedy(90), greedy(200), greedy(60)});
  const std::vector<Outcome> plain = run_jobs(aidreams(), plain_jobs, config(1, 16), true);
  // The target as its own draft: every proposal is kept (the overhead bound's case).
  const std::vector<Outcome> self =
      run_jobs(aidreams(), speculating(plain_jobs, draft(4)), with_draft(config(4, 4), aidreams()));
  expect_identical(plain, self);
  EXPECT_EQ(total_accepted(self), total_drafted(self));
  EXPECT_GT(total_drafted(self), 0);
  // A random-weight draft: proposals mostly rejected, output unchanged; mixed with plain ones.
  const std::vector<Outcome> random =
      run_jobs(aidreams(), speculating(plain_jobs, draft(3), true), with_draft(config(4, 8), random_model(DType::F32)));
  expect_identical(plain, random);
  EXPECT_GT(total_drafted(random), 0);
  // A target pool of one context plus a little: sequences preempt each other while their
  // draft states come and go.
  const int64_t context = aidreams().model->config.context_length;
  const int64_t per_block = KvCache::bytes_per_token(aidreams().model->config.kv_shape(), kDefaultKvTypes) * 8;
  const std::vector<Outcome> pressed = run_jobs(aidreams(), speculating(plain_jobs, draft(5)),
                                                with_draft(config(4, 8, (context / 8 + 4) * per_block), aidreams()));
  expect_identical(plain, pressed);
  EXPECT_GT(last_preemptions, 0);
  EXPECT_EQ(total_accepted(pressed), total_drafted(pressed));
}

TEST(SpeculativeEngine, SelfDraftStoresTheTargetsKvTypeAndKeepsEveryProposal) {
  // Random weights put top-2 logits within rounding of each other, so a draft that stored its
  // K/V in another precision than the target would lose some proposals; the same model with the
  // same KV type proposes exactly what the target verifies (batch invariance).
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);  // its tokenizer
  const Loaded& model = random_model(DType::Q8_0);
  const std::vector<Job> plain_jobs = jobs_for({greedy(120), greedy(90)});
  for (const KvTypes types : {KvTypes{DType::F16, DType::F16}, KvTypes{DType::BF16, DType::F16}}) {
    EngineConfig plain_config = config(1, 16);
    plain_config.kv_types = types;
    const std::vector<Outcome> plain = run_jobs(model, plain_jobs, plain_config, true);
    EngineConfig self_config = with_draft(config(2, 8), model);
    self_config.kv_types = types;
    const std::vector<Outcome> self = run_jobs(model, speculating(plain_jobs, draft(4)), self_config);
    expect_identical(plain, self);
    EXPECT_GT(total_drafted(self), 0) << kv_types_description(types);
    EXPECT_EQ(total_accepted(self), total_drafted(self)) << kv_types_description(types);
  }
}

TEST(SpeculativeEngine, DraftModelSamplingKeepsTheTargetDistribution) {
  // Many seeds of a short sampled continuation, plain and with a (wrong) random draft: the
  // distributions of each request's 2nd and 3rd tokens (the 1st comes from the prompt's pass,
  // not from speculation) must agree (two-sample chi-square), while a seed-for-seed
  // comparison shows the draws did differ (the rule, not a copy of plain sampling, made them).
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  constexpr int kSeeds = 2000;
  std::vector<Job> jobs;
  for (int seed = 0; seed < kSeeds; ++seed) {
    GenerationParams p = sampled(3, static_cast<uint64_t>(seed) + 100);
    p.sampling.top_k = 4;
    p.sampling.temperature = 1.0f;
    p.sampling.repetition_penalty = 1.0f;
    jobs.push_back({"The dream", p});
  }
  const std::vector<Outcome> plain = run_jobs(aidreams(), jobs, config(16, 16));
  const std::vector<Outcome> spec =
      run_jobs(aidreams(), speculating(jobs, draft(2)), with_draft(config(16, 16), random_model(DType::F32)));
  int differing = 0;
  for (size_t position : {1u, 2u}) {
    std::map<int32_t, double> a, b;  // token -> count
    for (int i = 0; i < kSeeds; ++i) {
      const Outcome& x = plain[static_cast<size_t>(i)];
      const Outcome& y = spec[static_cast<size_t>(i)];
      ASSERT_EQ(x.ids.size(), 3u);
      ASSERT_EQ(y.ids.size(), 3u);
      a[x.ids[position]] += 1;
      b[y.ids[position]] += 1;
      differing += x.ids[position] != y.ids[position] ? 1 : 0;
    }
    // Equal sample sizes: sum (a - b)^2 / (a + b) is chi-square with (cells - 1) degrees of
    // freedom; cells are at most 16 here (top-k 4 after up to 4 different prefixes), and 50
    // is past its 1e-5 tail.
    double chi = 0.0;
    std::map<int32_t, double> cells = a;
    for (const auto& [token, n] : b) cells[token] += 0.0;
    for (const auto& cell : cells) {
      const int32_t token = cell.first;
      const double na = a.count(token) ? a[token] : 0.0, nb = b.count(token) ? b[token] : 0.0;
      chi += (na - nb) * (na - nb) / (na + nb);
    }
    EXPECT_LT(chi, 50.0) << "token " << position << " over " << cells.size() << " cells";
  }
  EXPECT_GT(differing, kSeeds / 20);
  EXPECT_GT(total_drafted(spec), 0);
}

TEST(SpeculativeEngine, DraftVocabularyMismatchIsAnInputError) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  test_support::RandomModelSpec spec;
  spec.vocab_size = 300;
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tandem_spec_vocab300_" + std::to_string(::getpid()) + ".gguf"))
          .string();
  test_support::write_random_model(spec, path);
  std::shared_ptr<const Model> other = load_model(path);
  std::filesystem::remove(path);
  EngineConfig c = config(1, 16);
  c.draft_model = other;
  try {
    Engine engine(aidreams().model, aidreams().tokenizer, c, pool());
    ADD_FAILURE() << "a 300-token draft for a 512-token target was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem
