// Embedding requests through the Engine (GenerationParams::pooling): the pooled vector is the
// mean (or the last row) of the prompt's hidden states after the final norm, checked against
// rows read from a plain Forward pass with its layer observer and normed here in double; it
// does not depend on chunking, batch neighbours or the prefix cache (bit for bit); mean and
// last, and a pooled vector without the final norm, differ (the comparison can fail).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "support/shared_data.h"
#include "tokenizer/load_tokenizer.h"

namespace tandem {
namespace {

const char* const kModel = testing::kAidreamsGguf;

ThreadPool& pool() {
  static ThreadPool p{2};
  return p;
}

struct Loaded {
  std::shared_ptr<const Model> model;
  Tokenizer tokenizer;
};

const Loaded& aidreams() {
  static const Loaded loaded = [] {
    const std::string path = testing::shared_path(kModel);
    std::shared_ptr<const Model> model = load_model(path);
    return Loaded{model, load_tokenizer(path, "", model->config.vocab_size)};
  }();
  return loaded;
}

std::vector<int32_t> ids(const std::string& text) { return aidreams().tokenizer.encode(text, true); }

// The last layer's residual rows of `prompt` from one plain forward pass, final-normed in double.
std::vector<std::vector<double>> reference_rows(const std::vector<int32_t>& prompt, bool apply_norm = true) {
  const Model& model = *aidreams().model;
  const ModelConfig& c = model.config;
  Forward forward(aidreams().model, static_cast<int64_t>(prompt.size()), pool());
  KvCache cache(c.kv_shape(), c.context_length, 1);
  std::vector<std::vector<double>> rows;
  forward.set_layer_observer([&](int64_t layer, std::span<const float> hidden) {
    if (layer != c.n_layers - 1) return;
    const float* weight = model.weights.output_norm.f32();
    for (size_t t = 0; t < prompt.size(); ++t) {
      const float* x = hidden.data() + t * c.d_model;
      double sum_sq = 0.0;
      for (int64_t i = 0; i < c.d_model; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
      const double inv = apply_norm ? 1.0 / std::sqrt(sum_sq / static_cast<double>(c.d_model) + c.rms_norm_eps) : 1.0;
      std::vector<double> row(static_cast<size_t>(c.d_model));
      for (int64_t i = 0; i < c.d_model; ++i) row[static_cast<size_t>(i)] = x[i] * inv * (apply_norm ? weight[i] : 1.0);
      rows.push_back(std::move(row));
    }
  });
  Batch batch;
  const int32_t seq = batch.add_sequence(cache.whole_pool_blocks());
  for (size_t t = 0; t < prompt.size(); ++t) batch.add(prompt[t], static_cast<int32_t>(t), seq, t + 1 == prompt.size());
  forward.run(batch, cache);
  return rows;
}

std::vector<double> reference_embedding(const std::vector<int32_t>& prompt, Pooling pooling, bool apply_norm = true) {
  const std::vector<std::vector<double>> rows = reference_rows(prompt, apply_norm);
  if (pooling == Pooling::Last) return rows.back();
  std::vector<double> mean(rows[0].size(), 0.0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) mean[i] += row[i] / static_cast<double>(rows.size());
  return mean;
}

double max_abs_difference(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst;
}

struct Job {
  std::vector<int32_t> prompt;
  Pooling pooling = Pooling::None;  // None: a generation request (8 greedy tokens)
};

struct Outcome {
  std::vector<float> embedding;
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::None;
  int64_t cached_tokens = 0;
};

// Runs the jobs on one engine, all submitted before the first step (they share batches).
std::vector<Outcome> run_jobs(const std::vector<Job>& jobs, int64_t max_batch_tokens, int32_t max_seqs = 4,
                              int64_t kv_memory_bytes = 0) {
  EngineConfig config;
  config.max_seqs = max_seqs;
  config.max_batch_tokens = max_batch_tokens;
  config.block_size = 8;
  config.kv_memory_bytes = kv_memory_bytes;
  config.kv_types = {DType::F32, DType::F32};  // as the reference's plain pass keeps K/V
  Engine engine(aidreams().model, aidreams().tokenizer, config, pool());
  std::vector<Outcome> outcomes(jobs.size());
  for (size_t j = 0; j < jobs.size(); ++j) {
    GenerationParams params;
    params.sampling.temperature = 0.0f;
    params.max_tokens = jobs[j].pooling == Pooling::None ? 8 : 1;
    params.pooling = jobs[j].pooling;
    engine.submit(jobs[j].prompt, params, [&outcomes, j](RequestEvent&& event) {
      Outcome& out = outcomes[j];
      out.tokens.insert(out.tokens.end(), event.tokens.begin(), event.tokens.end());
      if (!event.finished) return;
      out.embedding = std::move(event.embedding);
      out.reason = event.finish_reason;
      out.cached_tokens = event.cached_tokens;
    });
  }
  engine.run_until_idle();
  EXPECT_EQ(engine.stats().blocks.used, 0);
  return outcomes;
}

const std::string kText = "The dream was a quiet river of light, and I followed it into the morning.";

TEST(EmbeddingEngine, MeanAndLastMatchTheFinalNormedHiddenStates) {
  TANDEM_REQUIRE_SHARED(kModel);
  const std::vector<int32_t> prompt = ids(kText);
  const std::vector<Outcome> out = run_jobs({{prompt, Pooling::Mean}, {prompt, Pooling::Last}}, 512);
  for (const Outcome& o : out) {
    EXPECT_EQ(o.reason, FinishReason::EndOfSequence);
    EXPECT_TRUE(o.tokens.empty());  // nothing is sampled
  }
  const std::vector<double> mean = reference_embedding(prompt, Pooling::Mean);
  const std::vector<double> last = reference_embedding(prompt, Pooling::Last);
  EXPECT_LT(max_abs_difference(out[0].embedding, mean), 1e-4);
  EXPECT_LT(max_abs_difference(out[1].embedding, last), 1e-4);
  // Wrong variants are told apart: mean vs last, and the rows without the final norm.
  EXPECT_GT(max_abs_difference(out[0].embedding, last), 1e-2);
  EXPECT_GT(max_abs_difference(out[0].embedding, reference_embedding(prompt, Pooling::Mean, false)), 1e-2);
}

TEST(EmbeddingEngine, ChunkingNeighboursAndThePrefixCacheChangeNoBit) {
  TANDEM_REQUIRE_SHARED(kModel);
  const std::vector<int32_t> prompt = ids(kText);
  const std::vector<Outcome> alone = run_jobs({{prompt, Pooling::Mean}, {prompt, Pooling::Last}}, 512, 1);
  // Small chunks, generation neighbours with the same prefix (published to the prefix cache
  // before the embeddings are admitted, since max_seqs is 1 and they go first), other embeddings.
  const std::vector<Outcome> busy = run_jobs({{prompt, Pooling::None},
                                              {ids("I see the sea"), Pooling::Mean},
                                              {prompt, Pooling::Mean},
                                              {prompt, Pooling::Last},
                                              {ids("Once upon a time"), Pooling::None}},
                                             7, 1);
  EXPECT_EQ(busy[2].embedding, alone[0].embedding);
  EXPECT_EQ(busy[3].embedding, alone[1].embedding);
  EXPECT_EQ(busy[2].cached_tokens, 0);  // mean pooling computes every row
  EXPECT_GT(busy[3].cached_tokens, 0);  // last pooling reuses the cached prefix
  const std::vector<Outcome> together =
      run_jobs({{prompt, Pooling::Mean}, {ids("I see the sea"), Pooling::Last}, {prompt, Pooling::Last}}, 16, 3);
  EXPECT_EQ(together[0].embedding, alone[0].embedding);
  EXPECT_EQ(together[2].embedding, alone[1].embedding);
}

TEST(EmbeddingEngine, EmbeddingRequestsRefuseGrammarAndSpeculation) {
  TANDEM_REQUIRE_SHARED(kModel);
  EngineConfig config;
  Engine engine(aidreams().model, aidreams().tokenizer, config, pool());
  GenerationParams params;
  params.max_tokens = 1;
  params.pooling = Pooling::Mean;
  params.speculation.type = SpeculationType::Ngram;
  EXPECT_THROW(engine.submit(ids("hi"), params, nullptr), InputError);
}

}  // namespace
}  // namespace tandem
