// Micro-batch cuts (dist/micro_batches.h): where a step's batch is cut (whole sequences, about
// equal tokens, never an empty part), that the parts put back together are the batch, and that
// running the parts one after another through a two-stage split of a random model — as a
// pipeline rank does — gives the whole model's logits on the whole batch bit for bit, over a
// prefill step and a decode step that reads the prefill's KV.
#include "dist/micro_batches.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/forward.h"
#include "model/model.h"
#include "support/random_model.h"

namespace tandem {
namespace {

// Sequences of the given lengths, one after another; sequence s's blocks are 10 s + its index.
Batch batch_of(const std::vector<int32_t>& lengths, const std::vector<int32_t>& first_positions = {}) {
  Batch batch;
  for (size_t s = 0; s < lengths.size(); ++s) {
    const int32_t first = first_positions.empty() ? 0 : first_positions[s];
    std::vector<int32_t> table;
    for (int32_t b = 0; b * 4 < first + lengths[s]; ++b) table.push_back(static_cast<int32_t>(10 * s) + b);
    const int32_t seq = batch.add_sequence(table);
    for (int32_t i = 0; i < lengths[s]; ++i)
      batch.add(static_cast<int32_t>(3 + 7 * s + static_cast<size_t>(i)) % 60, first + i, seq, i == lengths[s] - 1);
  }
  return batch;
}

TEST(MicroBatches, CutsAtSequencesIntoAboutEqualTokens) {
  EXPECT_EQ(micro_batch_bounds(batch_of({1, 1, 1, 1, 1, 1, 1, 1}), 2), (std::vector<int32_t>{0, 4, 8}));
  // A long prefill chunk alone, the decodes together.
  EXPECT_EQ(micro_batch_bounds(batch_of({20, 1, 1, 1}), 2), (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(micro_batch_bounds(batch_of({1, 1, 1, 20}), 2), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(micro_batch_bounds(batch_of({5, 5, 5, 5, 5, 5}), 3), (std::vector<int32_t>{0, 2, 4, 6}));
  // Fewer sequences than parts: one part each; one part: the batch.
  EXPECT_EQ(micro_batch_bounds(batch_of({7}), 2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(micro_batch_bounds(batch_of({2, 9}), 4), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(micro_batch_bounds(batch_of({1, 2, 3}), 1), (std::vector<int32_t>{0, 3}));
}

TEST(MicroBatches, PartsPutBackTogetherAreTheBatch) {
  const Batch batch = batch_of({3, 1, 6, 1, 2}, {0, 9, 2, 30, 5});
  const std::vector<int32_t> bounds = micro_batch_bounds(batch, 3);
  ASSERT_EQ(bounds.size(), 4u);
  Batch joined;
  Batch part;
  for (size_t p = 0; p + 1 < bounds.size(); ++p) {
    extract_micro_batch(batch, bounds[p], bounds[p + 1], part);
    EXPECT_EQ(part.n_sequences(), bounds[p + 1] - bounds[p]);
    for (int32_t s = 0; s < part.n_sequences(); ++s) joined.add_sequence(part.block_tables[static_cast<size_t>(s)]);
    for (int64_t t = 0; t < part.n_tokens(); ++t) {
      const auto i = static_cast<size_t>(t);
      EXPECT_LT(part.seq_ids[i], part.n_sequences());
      joined.add(part.tokens[i], part.positions[i], part.seq_ids[i] + bounds[p], part.wants_logits[i] != 0);
    }
  }
  EXPECT_EQ(joined.tokens, batch.tokens);
  EXPECT_EQ(joined.positions, batch.positions);
  EXPECT_EQ(joined.seq_ids, batch.seq_ids);
  EXPECT_EQ(joined.wants_logits, batch.wants_logits);
  EXPECT_EQ(joined.block_tables, batch.block_tables);
}

TEST(MicroBatches, PartsThroughTwoStagesEqualTheWholeModel) {
  test_support::TempDir dir;
  test_support::RandomModelSpec spec;
  spec.d_model = 64, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 96, spec.n_layers = 3, spec.seed = 31;
  const std::string path = dir.file("model.gguf");
  test_support::write_random_model(spec, path);
  const std::shared_ptr<const Model> whole = load_model(path);
  const std::shared_ptr<const Model> first = load_model(path, {.layers = LayerRange{0, 2}});
  const std::shared_ptr<const Model> last = load_model(path, {.layers = LayerRange{2, 3}});
  ThreadPool pool(2);
  constexpr int64_t kMaxTokens = 64;
  constexpr int64_t kBlocks = 64;
  Forward whole_forward(whole, kMaxTokens, pool), first_forward(first, kMaxTokens, pool),
      last_forward(last, kMaxTokens, pool);
  KvCache whole_cache(whole->kv_shape(), kBlocks, 4), first_cache(first->kv_shape(), kBlocks, 4),
      last_cache(last->kv_shape(), kBlocks, 4);

  // A prefill of four sequences, then one decode token each on top of it.
  const std::vector<int32_t> prompt_lengths = {9, 2, 13, 5};
  const std::vector<Batch> steps = {batch_of(prompt_lengths), batch_of({1, 1, 1, 1}, prompt_lengths)};
  for (size_t step = 0; step < steps.size(); ++step) {
    const Batch& batch = steps[step];
    const std::span<const float> expected_span = whole_forward.run(batch, whole_cache);
    const std::vector<float> expected(expected_span.begin(), expected_span.end());
    std::vector<float> got;
    const std::vector<int32_t> bounds = micro_batch_bounds(batch, 2);
    ASSERT_EQ(bounds.size(), 3u);
    Batch part;
    for (size_t p = 0; p + 1 < bounds.size(); ++p) {
      extract_micro_batch(batch, bounds[p], bounds[p + 1], part);
      const std::span<const float> hidden_span = first_forward.run_stage(part, {}, first_cache);
      const std::vector<float> hidden(hidden_span.begin(), hidden_span.end());  // as sent
      const std::span<const float> rows = last_forward.run_stage(part, hidden, last_cache);
      got.insert(got.end(), rows.begin(), rows.end());
    }
    ASSERT_EQ(got.size(), expected.size()) << "step " << step;
    EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0) << "step " << step;
  }
}

}  // namespace
}  // namespace tandem
