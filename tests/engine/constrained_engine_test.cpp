// Grammar-constrained decoding through the Engine (GenerationParams::grammar): on a
// random-weight model, whose unconstrained output is noise, every output satisfies its
// grammar and ends when the grammar does; a constrained sequence's tokens do not depend on
// what else is in the batch; speculative decoding (prompt lookup and a draft model) leaves
// the output token-identical. Every run ends with no KV block in use.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
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

// Random weights with aidreams260K's vocabulary (a real SentencePiece vocabulary with byte
// fallback), so that what the grammar does not force is noise.
const Loaded& random_model() {
  static const Loaded loaded = [] {
    std::shared_ptr<const Model> vocab_source = load_model(kAidreams);
    test_support::RandomModelSpec spec;
    spec.d_model = 64;
    spec.n_heads = 4;
    spec.n_kv_heads = 2;
    spec.d_ff = 96;
    spec.vocab_size = vocab_source->config.vocab_size;
    spec.context_length = 1024;
    spec.dtype = DType::F32;
    spec.seed = 23;
    const std::string path =
        (std::filesystem::temp_directory_path() / ("tandem_constrained_random_" + std::to_string(::getpid()) + ".gguf"))
            .string();
    test_support::write_random_model(spec, path);
    Loaded result{load_model(path), load_tokenizer(kAidreams, "", spec.vocab_size)};
    std::filesystem::remove(path);
    return result;
  }();
  return loaded;
}

struct Outcome {
  std::vector<int32_t> ids;
  std::string text;
  FinishReason reason = FinishReason::None;
};

struct Job {
  std::string prompt;
  GenerationParams params;
};

std::vector<Outcome> run_jobs(const std::vector<Job>& jobs, int32_t max_seqs, bool one_at_a_time,
                              std::shared_ptr<const Model> draft = nullptr) {
  const Loaded& loaded = random_model();
  EngineConfig config;
  config.max_seqs = max_seqs;
  config.block_size = 8;
  config.draft_model = std::move(draft);
  Engine engine(loaded.model, loaded.tokenizer, config, pool());
  std::vector<Outcome> outcomes(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    Outcome& out = outcomes[i];
    engine.submit(loaded.tokenizer.encode(jobs[i].prompt, true), jobs[i].params, [&out](RequestEvent&& e) {
      out.ids.insert(out.ids.end(), e.tokens.begin(), e.tokens.end());
      out.text += e.text;
      if (e.finished) out.reason = e.finish_reason;
    });
    if (one_at_a_time) engine.run_until_idle();
  }
  engine.run_until_idle();
  EXPECT_EQ(engine.stats().blocks.used, 0) << "leaked KV blocks";
  return outcomes;
}

Outcome run_one(const Job& job) { return run_jobs({job}, 1, true).front(); }

GenerationParams params(std::shared_ptr<const grammar::Grammar> g, float temperature, uint64_t seed,
                        int64_t max_tokens = 900) {
  GenerationParams p;
  p.sampling.temperature = temperature;
  p.sampling.top_k = 0;
  p.sampling.top_p = 1.0f;
  p.sampling.min_p = 0.0f;
  p.sampling.seed = seed;
  p.max_tokens = max_tokens;
  p.grammar = std::move(g);
  return p;
}

// {"flag": boolean, "color": "red" | "green" | "blue", "count": integer, "tags": [string, ≤ 2]}:
// a finite language up to whitespace and number/string lengths.
const nlohmann::ordered_json kSchema = nlohmann::ordered_json::parse(R"({
  "type": "object",
  "properties": {
    "flag": {"type": "boolean"},
    "color": {"enum": ["red", "green", "blue"]},
    "count": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 2}
  },
  "required": ["flag", "color", "count", "tags"],
  "additionalProperties": false
})");

std::shared_ptr<const grammar::Grammar> schema_grammar() {
  static const auto g = std::make_shared<const grammar::Grammar>(grammar::json_schema_grammar(kSchema));
  return g;
}

// What a validator checks of kSchema, by hand (the schema is small).
void expect_valid(const std::string& text) {
  nlohmann::json value;
  ASSERT_NO_THROW(value = nlohmann::json::parse(text)) << text;
  ASSERT_TRUE(value.is_object()) << text;
  EXPECT_EQ(value.size(), 4u) << text;
  EXPECT_TRUE(value["flag"].is_boolean()) << text;
  const nlohmann::json& color = value["color"];
  EXPECT_TRUE(color == "red" || color == "green" || color == "blue") << text;
  EXPECT_TRUE(value["count"].is_number_integer()) << text;
  ASSERT_TRUE(value["tags"].is_array()) << text;
  EXPECT_LE(value["tags"].size(), 2u) << text;
  for (const nlohmann::json& tag : value["tags"]) {
    ASSERT_TRUE(tag.is_string()) << text;
    // maxLength counts characters: UTF-8 bytes that do not continue one.
    const std::string bytes = tag.get<std::string>();
    const auto characters = std::count_if(bytes.begin(), bytes.end(), [](char c) { return (c & 0xC0) != 0x80; });
    EXPECT_LE(characters, 6) << text;
  }
}

TEST(ConstrainedEngine, SampledOutputsFollowAJsonSchemaAndEndWithIt) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const Outcome out = run_one({"The dream", params(schema_grammar(), 1.0f, seed)});
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + out.text);
    EXPECT_EQ(out.reason, FinishReason::EndOfSequence);
    expect_valid(out.text);
  }
}

TEST(ConstrainedEngine, UnconstrainedOutputOfTheSameModelIsNotJson) {
  // The check above can fail: without the grammar this model writes noise.
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const Outcome out = run_one({"The dream", params(nullptr, 1.0f, 1, 40)});
  EXPECT_FALSE(nlohmann::json::accept(out.text)) << out.text;
}

TEST(ConstrainedEngine, GbnfChoiceEndsWhenTheGrammarIsCompleteEvenWithIgnoreEos) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= "yes" | "no" | "maybe")"));
  for (bool ignore_eos : {false, true}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      GenerationParams p = params(g, 1.0f, seed, 50);
      p.ignore_eos = ignore_eos;
      const Outcome out = run_one({"I see", p});
      EXPECT_TRUE(out.text == "yes" || out.text == "no" || out.text == "maybe") << out.text;
      EXPECT_EQ(out.reason, FinishReason::EndOfSequence) << out.text;
    }
  }
}

TEST(ConstrainedEngine, AConstrainedSequenceIgnoresItsBatchNeighbours) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  std::vector<Job> jobs = {{"The dream", params(schema_grammar(), 0.9f, 5)},
                           {"I see", params(nullptr, 0.9f, 6, 60)},
                           {"Echoes of light", params(schema_grammar(), 0.0f, 0)},
                           {"A", params(nullptr, 0.0f, 0, 60)}};
  const std::vector<Outcome> alone = run_jobs(jobs, 1, true);
  const std::vector<Outcome> batched = run_jobs(jobs, 4, false);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(batched[i].ids, alone[i].ids) << "job " << i;
    EXPECT_EQ(batched[i].reason, alone[i].reason) << "job " << i;
  }
  expect_valid(alone[0].text);
  expect_valid(alone[2].text);
}

TEST(ConstrainedEngine, SpeculationLeavesConstrainedOutputTokenIdentical) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  std::vector<Job> plain = {{"The dream", params(schema_grammar(), 0.0f, 0)},
                            {"I see", params(schema_grammar(), 1.0f, 3)},
                            {"Echoes of light", params(schema_grammar(), 0.7f, 9)}};
  const std::vector<Outcome> reference = run_jobs(plain, 3, false);
  for (SpeculationType type : {SpeculationType::Ngram, SpeculationType::Draft}) {
    std::vector<Job> jobs = plain;
    for (Job& job : jobs) {
      job.params.speculation.type = type;
      job.params.speculation.draft_max = 4;
    }
    // The target as its own draft proposes what the target would sample unconstrained: the
    // mask rejects some of those proposals, and the rejection rule must still give p.
    const std::vector<Outcome> spec = run_jobs(jobs, 3, false, random_model().model);
    for (size_t i = 0; i < jobs.size(); ++i) {
      const bool greedy = jobs[i].params.sampling.temperature <= 0.0f;
      // A draft model's rejection rule draws its own coins, so only greedy is token-identical there.
      if (type == SpeculationType::Ngram || greedy) {
        EXPECT_EQ(spec[i].ids, reference[i].ids) << "job " << i;
      }
      EXPECT_EQ(spec[i].reason, FinishReason::EndOfSequence) << "job " << i;
      expect_valid(spec[i].text);
    }
  }
}

// A grammar within every limit whose masks are slow (issue 33): one "a" of ("a"?){0,300} can
// be any of 300 places, so the first mask builds ~1.5 million units of parse stacks (about
// 4 ms here, under the 2^21 budget) and every later one, a new state each token, merges
// ~100k (0.1-0.2 ms), where a step of this model takes tens of microseconds. `"a"*` after it
// keeps the grammar open (a request runs to max_tokens).
std::shared_ptr<const grammar::Grammar> heavy_grammar() {
  static const auto g = std::make_shared<const grammar::Grammar>(grammar::parse_gbnf(R"(root ::= ("a"?){0,300} "a"*)"));
  return g;
}

double median_of(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// What one request sent to a running engine gave, once it finished.
struct Finished {
  std::vector<int32_t> ids;
  std::vector<double> itl_ms;
  FinishReason reason = FinishReason::None;
};

// A request's events gathered until it finishes (they arrive on the engine thread).
struct Collector {
  std::mutex mutex;
  std::condition_variable done_cv;
  Finished result;
  bool done = false;
  EventCallback callback() {
    return [this](RequestEvent&& e) {
      std::lock_guard lock(mutex);
      result.ids.insert(result.ids.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) {
        result.itl_ms = e.itl_ms;
        result.reason = e.finish_reason;
        done = true;
        done_cv.notify_all();
      }
    };
  }
  Finished wait() {
    std::unique_lock lock(mutex);
    EXPECT_TRUE(done_cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; })) << "the request never finished";
    return result;
  }
};

// Masks are computed off the engine thread while the other sequences step (issue 33: "the
// mask computation must not hold the engine thread"): a plain sequence beside six requests
// with that grammar keeps its step latency — the median gap between its tokens, as a ratio
// against the same request alone. Before, every step waited for their six masks on the
// engine thread (~0.2 ms, against ~17 us a step; 25 ms for the first masks).
// Each grammar request's tokens are those it gives alone: a sample that waits for its mask
// keeps its logits, and the same logits and mask give the same token.
TEST(ConstrainedEngine, MasksThatCostMillisecondsDoNotHoldTheOtherSequencesSteps) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const Loaded& loaded = random_model();
  EngineConfig config;
  config.max_seqs = 8;
  config.block_size = 8;
  Engine engine(loaded.model, loaded.tokenizer, config, pool());
  engine.start();
  const std::vector<int32_t> prompt = loaded.tokenizer.encode("The dream", true);
  GenerationParams heavy = params(heavy_grammar(), 0.8f, 7, 64);
  heavy.ignore_eos = true;
  GenerationParams plain_request = params(nullptr, 0.0f, 0, 64);
  plain_request.ignore_eos = true;

  const auto run_plain = [&] {
    Collector plain;
    engine.submit(prompt, plain_request, plain.callback());
    return plain.wait();
  };
  run_plain();  // warm-up
  Finished heavy_alone;
  {
    Collector c;
    engine.submit(prompt, heavy, c.callback());
    heavy_alone = c.wait();
  }
  ASSERT_EQ(heavy_alone.reason, FinishReason::Length);
  std::vector<double> alone, beside;
  for (int round = 0; round < 3; ++round) {
    alone.push_back(median_of(run_plain().itl_ms));
    std::vector<std::unique_ptr<Collector>> grammar_requests;
    for (int i = 0; i < 6; ++i) {  // beside the plain one, under max_seqs
      grammar_requests.push_back(std::make_unique<Collector>());
      engine.submit(prompt, heavy, grammar_requests.back()->callback());
    }
    const Finished plain = run_plain();
    beside.push_back(median_of(plain.itl_ms));
    EXPECT_EQ(plain.ids.size(), 64u);
    for (auto& request : grammar_requests) {
      const Finished constrained = request->wait();
      EXPECT_EQ(constrained.reason, FinishReason::Length);
      EXPECT_EQ(constrained.ids, heavy_alone.ids) << "the same seed gave other tokens beside other requests";
    }
  }
  const double ratio = median_of(beside) / median_of(alone);
  // Measured ~1.0x; 4x leaves room for a loaded 2-core machine (the mask worker takes a core
  // from the forward pass). Steps that wait for the six masks were ~11x.
  EXPECT_LT(ratio, 4.0) << "median gap between the plain request's tokens: " << median_of(beside)
                        << " ms beside the grammar requests, " << median_of(alone) << " ms alone";
  EXPECT_GT(engine.stats().grammar_masks_off_thread, 0);
  engine.stop();
  EXPECT_EQ(engine.stats().blocks.used, 0);
  std::string text;
  for (int32_t id : heavy_alone.ids) text += loaded.tokenizer.token_bytes(id);
  EXPECT_EQ(text, std::string(text.size(), 'a'));
}

// A request cancelled while its mask is being computed stops that computation within
// microseconds (the mask reads its stop flag as it goes), rather than finishing a mask no one
// will read: the worker counts it as stopped. The first mask starts when the request is
// submitted and takes milliseconds; the cancel reaches it at the engine's next step. (Without
// the stop flag read inside the mask, the worker finishes it: 0 stopped.)
TEST(ConstrainedEngine, ACancelledRequestStopsItsMaskHalfWay) {
  TANDEM_REQUIRE_SHARED(testing::kAidreamsGguf);
  const Loaded& loaded = random_model();
  EngineConfig config;
  config.max_seqs = 2;
  config.block_size = 8;
  Engine engine(loaded.model, loaded.tokenizer, config, pool());
  const std::vector<int32_t> prompt = loaded.tokenizer.encode("The dream", true);
  GenerationParams heavy = params(heavy_grammar(), 0.8f, 7, 3);
  heavy.ignore_eos = true;
  // On a loaded machine this thread can be descheduled for longer than the mask takes, so the
  // cancel arrives after the mask is done: up to 5 attempts, one of which must see the mask
  // stopped half way (without the stop flag read inside the mask, none ever does).
  int64_t stopped = 0;
  for (int attempt = 0; attempt < 5 && stopped == 0; ++attempt) {
    FinishReason reason = FinishReason::None;
    const int64_t begun_before = engine.stats().grammar_masks_off_thread;
    const uint64_t id = engine.submit(prompt, heavy, [&](RequestEvent&& e) {
      if (e.finished) reason = e.finish_reason;
    });
    // Cancelled once its first mask is under way (it takes milliseconds; this sees it begin
    // within microseconds).
    const auto start = std::chrono::steady_clock::now();
    while (engine.stats().grammar_masks_off_thread == begun_before &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(10))
      std::this_thread::yield();
    ASSERT_EQ(engine.stats().grammar_masks_off_thread, begun_before + 1);
    engine.cancel(id);
    engine.run_until_idle();
    EXPECT_EQ(reason, FinishReason::Cancelled);
    for (int i = 0; i < 50 && (stopped = engine.stats().grammar_masks_stopped) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(stopped, 1) << "the cancelled request's mask ran to its end in every attempt";
  EXPECT_EQ(engine.stats().blocks.used, 0);
}

}  // namespace
}  // namespace tandem
