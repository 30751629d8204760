// Attention sinks (gpt-oss: a learned logit per query head that joins the softmax denominator
// and adds no value) at every level this CPU has, against a double computation of the formula
// — max over the scores and the sink, exp(sink - max) added to the sum — over head sizes the
// vector kernels take and ones they hand to the portable kernel, GQA groups, context lengths
// around the tile edges, K/V rows stored as F32, F16 and Q8_0, with and without sinks and with a
// soft-cap beside them; a run of tokens equals the tokens one at a time bit for bit with sinks,
// and sinks change the result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "base/quant.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "support/attention_reference.h"
#include "support/cpu_levels.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

// One layer's K and V rows [n_slots, kv_width] stored as `type` (rows padded as the cache's
// are), the values the kernels see (dequantized) for the double reference, and shuffled slots.
struct Cache {
  int64_t head_dim = 0, kv_width = 0, row_bytes = 0;
  DType type = DType::F32;
  std::vector<uint8_t> keys, values;            // [n_slots, row_bytes]
  std::vector<float> keys_float, values_float;  // [n_slots, kv_width] dequantized
  std::vector<int32_t> slots;                   // [n_slots]
  KvRows key_rows() const { return {keys.data(), row_bytes, type}; }
  KvRows value_rows() const { return {values.data(), row_bytes, type}; }
};

Cache make_cache(std::mt19937& rng, DType type, int64_t n_slots, int64_t n_kv_heads, int64_t head_dim) {
  Cache cache;
  cache.head_dim = head_dim, cache.kv_width = n_kv_heads * head_dim, cache.type = type;
  cache.row_bytes = dtype_row_bytes(type, cache.kv_width) + 8;
  auto store = [&](std::vector<uint8_t>& stored, std::vector<float>& dequantized) {
    const std::vector<float> original = random_floats(rng, n_slots * cache.kv_width, -1.0f, 1.0f);
    stored.assign(static_cast<size_t>(n_slots * cache.row_bytes), 0);
    dequantized.resize(original.size());
    for (int64_t s = 0; s < n_slots; ++s) {
      quantize_row(type, original.data() + s * cache.kv_width, stored.data() + s * cache.row_bytes, cache.kv_width);
      dequantize_row(type, stored.data() + s * cache.row_bytes, dequantized.data() + s * cache.kv_width,
                     cache.kv_width);
    }
  };
  store(cache.keys, cache.keys_float);
  store(cache.values, cache.values_float);
  cache.slots.resize(static_cast<size_t>(n_slots));
  std::iota(cache.slots.begin(), cache.slots.end(), 0);
  std::shuffle(cache.slots.begin(), cache.slots.end(), rng);
  return cache;
}

// One query head's output in double over the dequantized rows (soft-capped when cap > 0, with
// the sink logit when has_sink).
std::vector<double> attention_in_double(const float* q, const Cache& cache, int64_t kv_offset, int64_t n_ctx,
                                        double cap, bool has_sink, double sink) {
  return reference_attention(
      q, {cache.keys_float.data(), cache.values_float.data(), cache.kv_width, cache.slots.data()}, kv_offset, n_ctx,
      cache.head_dim, cap, has_sink ? std::optional<double>(sink) : std::nullopt);
}

std::vector<float> run_group(Isa isa, const float* queries, int64_t group, const Cache& cache, int64_t kv_offset,
                             int64_t n_ctx, float cap, const float* sinks) {
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
  std::vector<float> out(static_cast<size_t>(group * cache.head_dim));
  kernel_table(isa).attention(queries, group, cache.key_rows(), cache.value_rows(), kv_offset, cache.slots.data(),
                              n_ctx, cache.head_dim, scratch.data(), out.data(), cap, sinks, nullptr);
  return out;
}

// Head sizes: multiples of 16 (every vector kernel), of 8 only (AVX2's; AVX-512 falls back),
// and an odd one (portable everywhere; F32 rows only: quantized rows are whole 32-blocks).
const std::vector<int64_t> kHeadDims = {32, 24, 64, 72, 13};
const std::vector<int64_t> kContextLengths = {1, 7, 16, 17, 63, 64, 65, 130};

TEST(AttentionSinksTest, EveryLevelMatchesDouble) {
  std::mt19937 rng(20261203);
  for (Isa isa : supported_levels()) {
    for (DType type : {DType::F32, DType::F16, DType::Q8_0}) {
      for (int64_t head_dim : kHeadDims) {
        if (type != DType::F32 && head_dim % 32 != 0) continue;
        for (int64_t group : {1, 3}) {
          const int64_t n_kv_heads = 2, kv_offset = head_dim;  // the second KV head
          const Cache cache = make_cache(rng, type, 140, n_kv_heads, head_dim);
          const std::vector<float> queries = random_floats(rng, group * head_dim, -3.0f, 3.0f);
          // Per head a sink near the scores, one far above them (the output goes to ~0) and one
          // far below (no effect), in turn.
          std::vector<float> sinks = random_floats(rng, group, -2.0f, 2.0f);
          if (group == 3) sinks[1] = 40.0f, sinks[2] = -40.0f;
          for (int64_t n_ctx : kContextLengths) {
            for (float cap : {0.0f, 5.0f}) {
              for (bool with_sinks : {true, false}) {
                const std::vector<float> out = run_group(isa, queries.data(), group, cache, kv_offset, n_ctx, cap,
                                                         with_sinks ? sinks.data() : nullptr);
                for (int64_t g = 0; g < group; ++g) {
                  const std::vector<double> expected = attention_in_double(queries.data() + g * head_dim, cache,
                                                                           kv_offset, n_ctx, cap, with_sinks, sinks[g]);
                  for (int64_t i = 0; i < head_dim; ++i)
                    ASSERT_NEAR(expected[static_cast<size_t>(i)], out[static_cast<size_t>(g * head_dim + i)], 2e-5)
                        << isa_name(isa) << " " << dtype_name(type) << " head_dim " << head_dim << " group " << group
                        << " n_ctx " << n_ctx << " cap " << cap << " sinks " << with_sinks << " query " << g
                        << " element " << i;
                }
              }
            }
          }
        }
      }
    }
  }
}

// A sink near the scores scales the output down by a visible amount; with sinks null the
// result is the kernel's plain softmax bit for bit (the existing path is untouched).
TEST(AttentionSinksTest, SinkChangesTheOutput) {
  std::mt19937 rng(7);
  for (Isa isa : supported_levels()) {
    const int64_t head_dim = 64, n_ctx = 70;
    const Cache cache = make_cache(rng, DType::F32, 80, 1, head_dim);
    const std::vector<float> queries = random_floats(rng, head_dim, -3.0f, 3.0f);
    const float sink = 3.0f;
    const std::vector<float> plain = run_group(isa, queries.data(), 1, cache, 0, n_ctx, 0.0f, nullptr);
    const std::vector<float> sunk = run_group(isa, queries.data(), 1, cache, 0, n_ctx, 0.0f, &sink);
    double difference = 0.0;
    for (size_t i = 0; i < plain.size(); ++i) difference = std::max(difference, std::fabs(double{plain[i]} - sunk[i]));
    EXPECT_GT(difference, 1e-3) << isa_name(isa);
    // The sink only adds to the denominator: every element shrinks by the same factor.
    double ratio = 0.0;
    for (size_t i = 0; i < plain.size(); ++i)
      if (std::fabs(plain[i]) > 1e-2f) ratio = double{sunk[i]} / plain[i];
    EXPECT_GT(ratio, 0.0) << isa_name(isa);
    EXPECT_LT(ratio, 1.0) << isa_name(isa);
  }
}

// With sinks, a prefill block through attention_tokens gives each token what it gets alone.
TEST(AttentionSinksTest, TokensEqualTokenByTokenWithSinks) {
  std::mt19937 rng(11);
  for (Isa isa : supported_levels()) {
    for (int64_t head_dim : {16, 24, 64, 13}) {
      for (int64_t group : {1, 2, 5}) {
        const int64_t n_tokens = 21, stride = group * head_dim;
        const Cache cache = make_cache(rng, DType::F32, 160, 1, head_dim);
        const std::vector<float> queries = random_floats(rng, n_tokens * stride, -3.0f, 3.0f);
        const std::vector<float> sinks = random_floats(rng, group, -2.0f, 2.0f);
        std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
        std::iota(positions.begin(), positions.end(), 50);
        std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
        std::vector<float> together(static_cast<size_t>(n_tokens * stride));
        kernel_table(isa).attention_tokens(queries.data(), stride, n_tokens, group, positions.data(), cache.key_rows(),
                                           cache.value_rows(), 0, cache.slots.data(), head_dim, scratch.data(),
                                           together.data(), stride, 0.0f, sinks.data(), nullptr);
        for (int64_t t = 0; t < n_tokens; ++t) {
          const std::vector<float> alone =
              run_group(isa, queries.data() + t * stride, group, cache, 0, positions[t] + 1, 0.0f, sinks.data());
          ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + t * stride, alone.size() * sizeof(float)))
              << isa_name(isa) << " head_dim " << head_dim << " group " << group << " token " << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem
