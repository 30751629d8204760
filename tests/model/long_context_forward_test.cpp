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
#include "model/forward_steps.h"
#include "model/model.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using test_reference::random_tokens;
using test_reference::run_in_steps;
using test_support::RandomModelSpec;
using test_support::TempDir;

constexpr int64_t kTokens = 2 * kAttentionSegment + 152;
constexpr int32_t kBlockSize = 16;  // KV blocks, scattered over the pool

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
  const std::vector<int32_t> ids = random_tokens(kTokens, spec_.vocab_size, 12345);
  for (const KvTypes& types : {KvTypes{DType::F32, DType::F32}, KvTypes{DType::F16, DType::F16}}) {
    ThreadPool two(2);
    Forward whole_forward(model_, kTokens, two);
    const std::vector<float> whole = run_in_steps(whole_forward, ids, kTokens, kBlockSize, types);
    ASSERT_EQ(static_cast<int64_t>(whole.size()), kTokens * spec_.vocab_size);
    Forward chunk_forward(model_, 700, two);
    EXPECT_EQ(differing(whole, run_in_steps(chunk_forward, ids, 700, kBlockSize, types)), 0)
        << kv_types_description(types);
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      Forward decode_forward(model_, 1, pool);
      EXPECT_EQ(differing(whole, run_in_steps(decode_forward, ids, 1, kBlockSize, types)), 0)
          << kv_types_description(types) << ", decode on " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace tandem
