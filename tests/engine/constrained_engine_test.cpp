// Grammar-constrained decoding through the Engine (GenerationParams::grammar): on a
// random-weight model, whose unconstrained output is noise, every output satisfies its
// grammar and ends when the grammar does; a constrained sequence's tokens do not depend on
// what else is in the batch; speculative decoding (prompt lookup and a draft model) leaves
// the output token-identical. Every run ends with no KV block in use.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
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

}  // namespace
}  // namespace tandem
