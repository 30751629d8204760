// Sliding-window attention (a Mistral-style llama: attention.sliding_window on every layer)
// through the forward pass: against the float64 reference past the window (and the reference
// without a window as proof the comparison can fail); one prefill == chunks == token by token,
// bit for bit; batch invariance; and a KV pool that keeps only the window — blocks behind it
// dropped by the BlockManager and reused for later positions — gives the same logits, bit for
// bit, as a pool that keeps everything.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "kv/block_manager.h"
#include "model/forward.h"
#include "model/forward_steps.h"
#include "model/windowed_reference.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using test_reference::random_tokens;
using test_reference::reference_logits;
using test_reference::run_in_steps;
using test_reference::worst_relative_error;
using test_support::RandomModelSpec;
using test_support::RandomWeights;
using test_support::TempDir;

constexpr int32_t kBlockSize = 4;

RandomModelSpec sliding_spec() {
  RandomModelSpec spec;  // 4 heads of 12, 2 KV heads, window 7 (not a multiple of the block size)
  spec.d_model = 48, spec.n_heads = 4, spec.n_kv_heads = 2, spec.n_layers = 2;
  spec.sliding_window = 7, spec.context_length = 128, spec.seed = 61;
  return spec;
}

class SlidingWindowForwardTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> load(const RandomModelSpec& spec, RandomWeights& weights) {
    const std::string path = dir_.file("sliding.gguf");
    weights = test_support::write_random_model(spec, path);
    return load_model(path);
  }
  TempDir dir_;
  ThreadPool pool_{2};
};

TEST_F(SlidingWindowForwardTest, LoadsTheWindowForEveryLayer) {
  RandomWeights weights;
  const auto model = load(sliding_spec(), weights);
  EXPECT_EQ(model->config.sliding_window, 7);
  EXPECT_EQ(model->config.layer_window(0), 7);
  EXPECT_EQ(model->config.layer_window(1), 7);
  EXPECT_EQ(model->config.kv_window(), 7) << "every layer is local: the cache may forget what is behind the window";
}

// 40 positions, the window 7: most tokens see only part of their history.
TEST_F(SlidingWindowForwardTest, PrefillMatchesReferencePastTheWindow) {
  const RandomModelSpec spec = sliding_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  Forward forward(model, 64, pool_);
  const std::vector<int32_t> tokens = random_tokens(40, spec.vocab_size, 71);
  const std::vector<float> engine = run_in_steps(forward, tokens, 40);
  EXPECT_LE(worst_relative_error(engine, reference_logits(spec, weights, tokens), spec.vocab_size), 1e-4);
  EXPECT_GT(worst_relative_error(engine, reference_logits(spec, weights, tokens, {.no_window = true}), spec.vocab_size),
            1e-2)
      << "attending to the whole history should be a different model past the window";
}

// Chunks of 5 and token-by-token decode equal one prefill bit for bit, every row past the
// window included (a windowed token's tiles start at its window, whatever the chunking).
TEST_F(SlidingWindowForwardTest, PrefillEqualsChunkedAndTokenByTokenDecode) {
  const RandomModelSpec spec = sliding_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  Forward forward(model, 64, pool_);
  const std::vector<int32_t> tokens = random_tokens(45, spec.vocab_size, 72);
  const std::vector<float> whole = run_in_steps(forward, tokens, 45);
  const std::vector<float> chunked = run_in_steps(forward, tokens, 5);
  const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
  ASSERT_EQ(whole.size(), chunked.size());
  ASSERT_EQ(whole.size(), decoded.size());
  EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0);
}

// A window longer than the kernel's 64-position tile: tokens past it start mid-history, tiles
// from there; one prefill still equals decode bit for bit and the reference.
TEST_F(SlidingWindowForwardTest, WindowLongerThanAnAttentionTile) {
  RandomModelSpec spec = sliding_spec();
  spec.sliding_window = 70, spec.context_length = 256, spec.n_layers = 1;
  RandomWeights weights;
  const auto model = load(spec, weights);
  Forward forward(model, 160, pool_);
  const std::vector<int32_t> tokens = random_tokens(150, spec.vocab_size, 73);
  const std::vector<float> whole = run_in_steps(forward, tokens, 150);
  const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
  ASSERT_EQ(whole.size(), decoded.size());
  EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0);
  EXPECT_LE(worst_relative_error(whole, reference_logits(spec, weights, tokens), spec.vocab_size), 1e-4);
  EXPECT_GT(worst_relative_error(whole, reference_logits(spec, weights, tokens, {.no_window = true}), spec.vocab_size),
            1e-3);
}

// Sequence A alone equals A sharing batches with B (prefill and decode mixed), bit for bit.
TEST_F(SlidingWindowForwardTest, BatchInvariance) {
  const RandomModelSpec spec = sliding_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  const int64_t vocab = spec.vocab_size;
  const std::vector<int32_t> a = random_tokens(24, vocab, 81), b = random_tokens(20, vocab, 82);
  ThreadPool one(1);
  Forward alone_forward(model, 64, one);
  const std::vector<float> alone = run_in_steps(alone_forward, a, 24);

  Forward mixed_forward(model, 64, pool_);
  KvCache cache(model->config.kv_shape(), 16, kBlockSize);
  const std::vector<int32_t> blocks_b = {11, 3, 9, 0, 14}, blocks_a = {1, 10, 2, 8, 5, 15};
  std::vector<float> mixed(alone.size());
  Batch batch;
  batch.add_sequence(blocks_b);
  batch.add_sequence(blocks_a);
  for (int32_t p = 0; p < 12; ++p) batch.add(b[p], p, 0, true);
  for (int32_t p = 0; p < 9; ++p) batch.add(a[p], p, 1, true);
  std::span<const float> out = mixed_forward.run(batch, cache);
  std::copy_n(out.data() + 12 * vocab, 9 * vocab, mixed.data());
  int32_t next_b = 12;
  for (int32_t p = 9; p < 24; p += 3) {
    batch.clear();
    batch.add_sequence(blocks_b);
    batch.add_sequence(blocks_a);
    if (next_b < 20) batch.add(b[next_b], next_b, 0, true), ++next_b;
    for (int32_t i = p; i < p + 3; ++i) batch.add(a[i], i, 1, true);
    out = mixed_forward.run(batch, cache);
    const int64_t skip = batch.seq_ids[0] == 0 ? 1 : 0;
    std::copy_n(out.data() + skip * vocab, 3 * vocab, mixed.data() + p * vocab);
  }
  EXPECT_EQ(std::memcmp(alone.data(), mixed.data(), alone.size() * sizeof(float)), 0)
      << "sequence A's logits changed with its batch";
}

// The sequence through a BlockManager that drops the blocks behind the window, in a pool too
// small for the whole sequence (its dropped blocks come back for later positions, their old
// K/V overwritten): the logits equal those of a pool that keeps everything, bit for bit.
TEST_F(SlidingWindowForwardTest, DroppedBlocksAreReusedAndOutputsUnchanged) {
  const RandomModelSpec spec = sliding_spec();
  RandomWeights weights;
  const auto model = load(spec, weights);
  const std::vector<int32_t> tokens = random_tokens(60, spec.vocab_size, 91);
  for (int64_t step : {int64_t{1}, int64_t{6}}) {
    Forward forward(model, 64, pool_);
    const std::vector<float> kept = run_in_steps(forward, tokens, step);
    // Window 7 reaches into 3 blocks of 4 at most, plus the blocks of a chunk of 6.
    const int64_t n_blocks = 6;
    BlockManager blocks(n_blocks, kBlockSize, model->config.kv_window());
    KvCache cache(model->config.kv_shape(), n_blocks, kBlockSize);
    SequenceBlocks sequence;
    std::vector<float> windowed;
    Batch batch;
    int64_t most_held = 0;
    const int64_t n = static_cast<int64_t>(tokens.size());
    for (int64_t begin = 0; begin < n; begin += step) {
      const int64_t end = std::min(n, begin + step);
      if (begin == 0) {
        ASSERT_EQ(blocks.assign(sequence, std::span(tokens).first(static_cast<size_t>(end))), 0);
      } else {
        ASSERT_TRUE(blocks.grow(sequence, end)) << "the pool ran dry at position " << begin;
      }
      batch.clear();
      const int32_t seq = batch.add_sequence(sequence.table);
      for (int64_t p = begin; p < end; ++p)
        batch.add(tokens[static_cast<size_t>(p)], static_cast<int32_t>(p), seq, true);
      const std::span<const float> out = forward.run(batch, cache);
      windowed.insert(windowed.end(), out.begin(), out.end());
      blocks.publish_computed(sequence, tokens, end);
      blocks.drop_out_of_window(sequence, end);
      most_held = std::max(most_held, sequence.n_held());
    }
    EXPECT_EQ(sequence.table.size(), 15u) << "the table still spans every position";
    EXPECT_LE(most_held, 4) << "step " << step << ": the sequence should hold only its window's blocks";
    EXPECT_EQ(std::count(sequence.table.begin(), sequence.table.end(), kDroppedBlock), 13)
        << "positions 0..51 lie wholly behind the window of position 60";
    ASSERT_EQ(kept.size(), windowed.size());
    EXPECT_EQ(std::memcmp(kept.data(), windowed.data(), kept.size() * sizeof(float)), 0) << "step " << step;
    blocks.release(sequence);
    EXPECT_EQ(blocks.stats().used, 0);
  }
}

// A table whose dropped blocks lie inside a token's window is a caller's bug the forward pass
// reports as bad input rather than reading a wrong slot.
TEST_F(SlidingWindowForwardTest, DroppedBlockInsideTheWindowIsAnInputError) {
  RandomWeights weights;
  const auto model = load(sliding_spec(), weights);
  Forward forward(model, 64, pool_);
  KvCache cache(model->config.kv_shape(), 8, kBlockSize);
  Batch batch;
  const std::vector<int32_t> table = {kDroppedBlock, kDroppedBlock, 2, 3};  // positions 0..7 dropped
  const int32_t seq = batch.add_sequence(table);
  batch.add(1, 12, seq, true);  // reads positions 6..12: block 1 is needed
  EXPECT_THROW(forward.run(batch, cache), InputError);
}

}  // namespace
}  // namespace tandem
