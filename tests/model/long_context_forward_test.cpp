// The forward pass past one attention segment (kAttentionSegment positions), on a random model
// with one KV head (GQA group 4): a 2200-token sequence's logits are the same bit for bit
// whether its prompt is prefilled whole, in chunks, or decoded a token at a time — decode
// splitting each long context's segments over the threads — and for 1, 2 and 3 threads; on
// F32 and F16 caches.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"
#include "model/forward.h"
#include "model/model.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using test_support::RandomModelSpec;
using test_support::TempDir;

constexpr int64_t kTokens = 2 * kAttentionSegment + 152;

std::vector<int32_t> random_ids(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint32_t state = 12345;
  for (int32_t& id : ids) {
    state = state * 1664525u + 1013904223u;
    id = static_cast<int32_t>((state >> 8) % static_cast<uint32_t>(vocab));
  }
  return ids;
}

// Feeds `ids` as one sequence in batches of `step` tokens over a pool of scattered blocks of 16,
// every row asking for logits; returns [n, vocab].
std::vector<float> run_in_steps(Forward& forward, const std::vector<int32_t>& ids, int64_t step, const KvTypes& types) {
  const auto n = static_cast<int64_t>(ids.size());
  const int64_t block_size = 16, n_blocks = (n + block_size - 1) / block_size;
  KvCache cache(forward.model().config.kv_shape(), n_blocks, block_size, types);
  std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) blocks[static_cast<size_t>(b)] = static_cast<int32_t>((b * 37) % n_blocks);
  std::vector<float> logits;
  Batch batch;
  for (int64_t begin = 0; begin < n; begin += step) {
    batch.clear();
    const int32_t seq = batch.add_sequence(blocks);
    for (int64_t p = begin; p < std::min(n, begin + step); ++p)
      batch.add(ids[static_cast<size_t>(p)], static_cast<int32_t>(p), seq, true);
    const std::span<const float> out = forward.run(batch, cache);
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

int64_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  int64_t count = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) count += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return count;
}

class LongContextForwardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.d_model = 64, spec_.n_heads = 4, spec_.n_kv_heads = 1, spec_.d_ff = 96, spec_.n_layers = 2;
    spec_.context_length = kTokens, spec_.seed = 77;
    const std::string path = dir_.file("long-context.gguf");
    test_support::write_random_model(spec_, path);
    model_ = load_model(path);
  }
  RandomModelSpec spec_;
  TempDir dir_;
  std::shared_ptr<const Model> model_;
};

TEST_F(LongContextForwardTest, PrefillChunksAndDecodeOnAnyThreadCountGiveTheSameBits) {
  const std::vector<int32_t> ids = random_ids(kTokens, spec_.vocab_size);
  for (const KvTypes& types : {KvTypes{DType::F32, DType::F32}, KvTypes{DType::F16, DType::F16}}) {
    ThreadPool two(2);
    Forward whole_forward(model_, kTokens, two);
    const std::vector<float> whole = run_in_steps(whole_forward, ids, kTokens, types);
    ASSERT_EQ(static_cast<int64_t>(whole.size()), kTokens * spec_.vocab_size);
    Forward chunk_forward(model_, 700, two);
    EXPECT_EQ(differing(whole, run_in_steps(chunk_forward, ids, 700, types)), 0) << kv_types_description(types);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      Forward decode_forward(model_, 1, pool);
      EXPECT_EQ(differing(whole, run_in_steps(decode_forward, ids, 1, types)), 0)
          << kv_types_description(types) << ", decode on " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace tandem
