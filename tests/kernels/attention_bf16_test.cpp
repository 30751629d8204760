// The bf16 attention kernel (avx512::attention_group_bf16 / attention_tokens_bf16, the active
// attention on an AVX512_BF16 CPU) and the accuracy it is allowed:
//  - against float64 on the rounded inputs (Q, K, V rounded to bf16 as the kernel rounds them):
//    the only other rounding is that of the softmax weights (2^-9 relative each, the same
//    weights in numerator and denominator), so |out - ref| <= 2^-8·max|v| plus the float
//    accumulation of the scores;
//  - against float64 on the rows as the cache stores them, the stated bound of the whole kernel: rounding Q and
//    K moves each score by at most 2^-8·S (S = max over positions of Σ|q_d·k_d|/sqrt(d)), so
//    |out - exact| <= (e^(2^-7·S) - 1)·2·max|v| + 2^-8·max|v|;
// over head sizes 16..256 (48 and 80: the last bf16 vector half padding), contexts around the
// block, tile and segment edges, GQA groups 1..8, peaked softmaxes, soft-caps, sinks and every
// KV cache type; and its batch invariance: a query alone equals, bit for bit, the same query in
// any group, in any run of tokens, and split into segments (decode == prefill).
// Skipped on CPUs without AVX512_BF16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "base/quant.h"
#include "kernels/amx/attention_amx.h"
#include "kernels/attention.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "support/attention_reference.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

bool has_bf16_kernel() {
  return static_cast<int>(detect_isa()) >= static_cast<int>(Isa::Avx512) && cpu_has_avx512_bf16();
}

float round_to_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

std::vector<float> rounded_to_bf16(std::vector<float> xs) {
  for (float& x : xs) x = round_to_bf16(x);
  return xs;
}

// A layer's K and V rows stored as `type` (a row stride past the heads, as the cache has), the
// stored values as floats, and a shuffled position -> slot table.
struct Cache {
  DType type = DType::F32;
  int64_t head_dim = 0, width = 0, row_bytes = 0;
  std::vector<float> key_floats, value_floats;  // the originals, [n_slots, width]
  std::vector<uint8_t> key_bytes, value_bytes;  // as stored
  std::vector<float> key_stored, value_stored;  // the stored values, [n_slots, width]
  std::vector<int32_t> slots;

  KvRows keys() const { return {key_bytes.data(), row_bytes, type}; }
  KvRows values() const { return {value_bytes.data(), row_bytes, type}; }
};

Cache make_cache(std::mt19937& rng, DType type, int64_t n_slots, int64_t n_kv_heads, int64_t head_dim) {
  Cache cache;
  cache.type = type, cache.head_dim = head_dim, cache.width = n_kv_heads * head_dim;
  cache.row_bytes = dtype_row_bytes(type, cache.width) + 64;
  const auto store = [&](std::vector<float>& floats, std::vector<uint8_t>& bytes, std::vector<float>& stored) {
    floats = random_floats(rng, n_slots * cache.width, -1.0f, 1.0f);
    bytes.assign(static_cast<size_t>(n_slots * cache.row_bytes), 0);
    stored.resize(floats.size());
    for (int64_t s = 0; s < n_slots; ++s) {
      uint8_t* row = bytes.data() + s * cache.row_bytes;
      if (type == DType::F32)
        std::memcpy(row, floats.data() + s * cache.width, static_cast<size_t>(cache.width) * sizeof(float));
      else
        quantize_row(type, floats.data() + s * cache.width, row, cache.width);
      dequantize_row(type, row, stored.data() + s * cache.width, cache.width);
    }
  };
  store(cache.key_floats, cache.key_bytes, cache.key_stored);
  store(cache.value_floats, cache.value_bytes, cache.value_stored);
  cache.slots.resize(static_cast<size_t>(n_slots));
  std::iota(cache.slots.begin(), cache.slots.end(), 0);
  std::shuffle(cache.slots.begin(), cache.slots.end(), rng);
  return cache;
}

// The kernel under test: bf16 scores and values, or bf16 values only; AVX-512 vectors or AMX
// tiles (the same roundings, the products added in another order).
struct Bf16Kernel {
  const char* name;
  AttentionArithmetic arithmetic;
  AttentionFn group;
  AttentionTokensFn tokens;
};

// The kernels this CPU runs: the AVX-512 ones (AVX512_BF16), the AMX one (AMX-BF16).
std::vector<Bf16Kernel> bf16_kernels() {
  std::vector<Bf16Kernel> kernels = {
      {"avx512 bf16", AttentionArithmetic::Bf16, avx512::attention_group_bf16, avx512::attention_tokens_bf16},
      {"avx512 bf16-values", AttentionArithmetic::Bf16Values, avx512::attention_group_bf16_values,
       avx512::attention_tokens_bf16_values}};
  if (cpu_has_amx_bf16())
    kernels.push_back({"amx bf16", AttentionArithmetic::Bf16, amx::attention_group_bf16, amx::attention_tokens_bf16});
  else
    std::printf("[   NOTE   ] no AMX-BF16 on this CPU: the AMX tile kernel is not tested here\n");
  return kernels;
}

std::vector<float> run_group(const Bf16Kernel& kernel, const float* queries, int64_t n_queries, const Cache& cache,
                             int64_t kv_offset, int64_t n_ctx, float softcap = 0.0f, const float* sinks = nullptr) {
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(n_queries)));
  std::vector<float> out(static_cast<size_t>(n_queries * cache.head_dim));
  kernel.group(queries, n_queries, cache.keys(), cache.values(), kv_offset, cache.slots.data(), n_ctx, cache.head_dim,
               scratch.data(), out.data(), softcap, sinks, nullptr);
  return out;
}

// max over positions 0..n_ctx-1 of Σ|q_d·k_d| / sqrt(head_dim).
double largest_abs_score(const float* q, const std::vector<float>& keys, const Cache& cache, int64_t kv_offset,
                         int64_t n_ctx) {
  double largest = 0.0;
  for (int64_t p = 0; p < n_ctx; ++p) {
    const float* k = keys.data() + cache.slots[p] * cache.width + kv_offset;
    double sum = 0.0;
    for (int64_t i = 0; i < cache.head_dim; ++i) sum += std::fabs(static_cast<double>(q[i]) * k[i]);
    largest = std::max(largest, sum / std::sqrt(static_cast<double>(cache.head_dim)));
  }
  return largest;
}

const DType kCacheTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};
const std::vector<int64_t> kContexts = {1, 2, 15, 16, 17, 33, 63, 64, 65, 127, 129, 200};

// Each (kernel, type, head size, group, query scale, context, soft-cap, sink) against both
// references (for bf16-values, Q and K are not rounded: the scores are the f32 kernel's, and
// the exact bound has no score term).
TEST(AttentionBf16Test, WithinItsBoundsOfDoubleOnRoundedAndOriginalInputs) {
  if (!has_bf16_kernel()) GTEST_SKIP() << "no AVX512_BF16 on this machine";
  std::mt19937 rng(29);
  const int64_t n_slots = 210, n_kv_heads = 2;
  int64_t checked = 0;
  for (const Bf16Kernel& kernel : bf16_kernels())
    for (DType type : kCacheTypes)
      for (int64_t head_dim : {16, 48, 64, 80, 128, 256}) {
        if (head_dim % dtype_block_geometry(type).first != 0) continue;
        const Cache cache = make_cache(rng, type, n_slots, n_kv_heads, head_dim);
        const bool scores_rounded = kernel.arithmetic == AttentionArithmetic::Bf16;
        const std::vector<float> keys_rounded = scores_rounded ? rounded_to_bf16(cache.key_stored) : cache.key_stored;
        const std::vector<float> values_rounded = rounded_to_bf16(cache.value_stored);
        for (int64_t group : {1, 3, 8})
          for (float q_bound : {1.0f, 8.0f, 30.0f})
            for (float softcap : {0.0f, 20.0f}) {
              const std::vector<float> queries = random_floats(rng, group * head_dim, -q_bound, q_bound);
              const std::vector<float> queries_rounded = scores_rounded ? rounded_to_bf16(queries) : queries;
              const bool with_sinks = softcap == 0.0f && q_bound == 8.0f;
              const std::vector<float> sinks = random_floats(rng, group, -2.0f, 6.0f);
              for (int64_t n_ctx : kContexts) {
                const int64_t kv_offset = (n_ctx % n_kv_heads) * head_dim;
                const std::vector<float> out = run_group(kernel, queries.data(), group, cache, kv_offset, n_ctx,
                                                         softcap, with_sinks ? sinks.data() : nullptr);
                for (int64_t g = 0; g < group; ++g) {
                  const std::optional<double> sink =
                      with_sinks ? std::optional<double>(sinks[static_cast<size_t>(g)]) : std::nullopt;
                  const float* q = queries.data() + g * head_dim;
                  const std::vector<double> on_rounded =
                      reference_attention(queries_rounded.data() + g * head_dim,
                                          {keys_rounded.data(), values_rounded.data(), cache.width, cache.slots.data()},
                                          kv_offset, n_ctx, head_dim, softcap, sink);
                  const std::vector<double> exact = reference_attention(
                      q, {cache.key_stored.data(), cache.value_stored.data(), cache.width, cache.slots.data()},
                      kv_offset, n_ctx, head_dim, softcap, sink);
                  // max|v| <= 1 (the stored and rounded values of numbers in [-1, 1]).
                  const double score_scale = largest_abs_score(q, cache.key_stored, cache, kv_offset, n_ctx);
                  const double rounded_bound =
                      std::ldexp(1.0, -8) * 1.05 + 2.0 * score_scale * static_cast<double>(head_dim) * 0x1p-24 + 1e-6;
                  const double score_shift = scores_rounded ? std::expm1(std::ldexp(1.0, -7) * score_scale) * 2.0 : 0.0;
                  const double exact_bound = (score_shift + std::ldexp(1.0, -8)) * 1.05 + 1e-6;
                  for (int64_t i = 0; i < head_dim; ++i) {
                    const double value = out[static_cast<size_t>(g * head_dim + i)];
                    ASSERT_NEAR(value, on_rounded[static_cast<size_t>(i)], rounded_bound)
                        << kernel.name << " " << dtype_name(type) << " head_dim " << head_dim << " group " << group
                        << " q_bound " << q_bound << " softcap " << softcap << " sinks " << with_sinks << " n_ctx "
                        << n_ctx << " query " << g << " dim " << i;
                    ASSERT_NEAR(value, exact[static_cast<size_t>(i)], exact_bound)
                        << "against the exact result: " << kernel.name << " " << dtype_name(type) << " head_dim "
                        << head_dim << " q_bound " << q_bound << " n_ctx " << n_ctx;
                  }
                  ++checked;
                }
              }
            }
      }
  EXPECT_GT(checked, 1000);
}

// A query's bits do not depend on the queries beside it: alone, in a GQA group, and in a run
// of tokens (attention_tokens: the prefill path) with repeated and gapped positions.
TEST(AttentionBf16Test, QueryAloneEqualsQueryInAnyGroupOrRunOfTokens) {
  if (!has_bf16_kernel()) GTEST_SKIP() << "no AVX512_BF16 on this machine";
  std::mt19937 rng(31);
  for (const Bf16Kernel& kernel : bf16_kernels())
    for (DType type : {DType::F16, DType::F32, DType::Q8_0})
      for (int64_t head_dim : {64, 80, 128, 256}) {
        if (head_dim % dtype_block_geometry(type).first != 0) continue;
        const int64_t n_kv_heads = 2, n_slots = 300;
        const Cache cache = make_cache(rng, type, n_slots, n_kv_heads, head_dim);
        for (int64_t group : {1, 2, 5}) {
          const std::vector<int32_t> positions = {0, 1, 14, 15, 16, 16, 40, 63, 64, 65, 100, 170, 171, 299};
          const auto n_tokens = static_cast<int64_t>(positions.size());
          const std::vector<float> queries = random_floats(rng, n_tokens * group * head_dim, -8.0f, 8.0f);
          const int64_t kv_offset = head_dim;  // the second KV head
          std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
          std::vector<float> together(static_cast<size_t>(n_tokens * group * head_dim));
          kernel.tokens(queries.data(), group * head_dim, n_tokens, group, positions.data(), cache.keys(),
                        cache.values(), kv_offset, cache.slots.data(), head_dim, scratch.data(), together.data(),
                        group * head_dim, 0.0f, nullptr, nullptr);
          for (int64_t t = 0; t < n_tokens; ++t)
            for (int64_t g = 0; g < group; ++g) {
              const float* q = queries.data() + (t * group + g) * head_dim;
              const std::vector<float> alone = run_group(kernel, q, 1, cache, kv_offset, int64_t{positions[t]} + 1);
              const std::vector<float> in_group = run_group(kernel, queries.data() + t * group * head_dim, group, cache,
                                                            kv_offset, int64_t{positions[t]} + 1);
              ASSERT_EQ(0, std::memcmp(alone.data(), in_group.data() + g * head_dim,
                                       static_cast<size_t>(head_dim) * sizeof(float)))
                  << kernel.name << " " << dtype_name(type) << " head_dim " << head_dim << " group " << group
                  << " token " << t;
              ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + (t * group + g) * head_dim,
                                       static_cast<size_t>(head_dim) * sizeof(float)))
                  << "in the run of tokens: " << kernel.name << " " << dtype_name(type) << " head_dim " << head_dim
                  << " group " << group << " token " << t;
            }
        }
      }
}

// A prefill block longer than one kernel call (the AVX-512 kernels take 128 queries a call, the
// AMX kernel 512): every token of a run of 300 (600 queries, cut into calls at different
// places per kernel) equals the same token alone, bit for bit.
TEST(AttentionBf16Test, RunLongerThanOneCallEqualsEachTokenAlone) {
  if (!has_bf16_kernel()) GTEST_SKIP() << "no AVX512_BF16 on this machine";
  std::mt19937 rng(41);
  const int64_t head_dim = 128, group = 2, n_tokens = 300;
  const Cache cache = make_cache(rng, DType::F16, n_tokens, 1, head_dim);
  std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
  std::iota(positions.begin(), positions.end(), 0);
  const std::vector<float> queries = random_floats(rng, n_tokens * group * head_dim, -8.0f, 8.0f);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
  for (const Bf16Kernel& kernel : bf16_kernels()) {
    std::vector<float> together(static_cast<size_t>(n_tokens * group * head_dim));
    kernel.tokens(queries.data(), group * head_dim, n_tokens, group, positions.data(), cache.keys(), cache.values(), 0,
                  cache.slots.data(), head_dim, scratch.data(), together.data(), group * head_dim, 0.0f, nullptr,
                  nullptr);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const std::vector<float> alone =
          run_group(kernel, queries.data() + t * group * head_dim, group, cache, 0, int64_t{positions[t]} + 1);
      ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + t * group * head_dim,
                               static_cast<size_t>(group * head_dim) * sizeof(float)))
          << kernel.name << " token " << t;
    }
  }
}

// Past kAttentionSegment positions the table's entry points split a context into segments:
// a token in a prefill run equals the same token decoded alone, bit for bit, and stays within
// the rounded-input bound of double.
TEST(AttentionBf16Test, SegmentedContextsDecodeEqualsPrefill) {
  if (!has_bf16_kernel()) GTEST_SKIP() << "no AVX512_BF16 on this machine";
  std::mt19937 rng(37);
  std::vector<Isa> levels = {Isa::Avx512};
  if (detect_isa() == Isa::Amx) levels.push_back(Isa::Amx);  // the tile kernel where AMX-BF16 is
  for (Isa level : levels) {
    const KernelTable& table = kernel_table(level, AttentionArithmetic::Bf16);
    ASSERT_EQ(table.attention_arithmetic, AttentionArithmetic::Bf16);
    const int64_t head_dim = 128, group = 2, n_slots = 2600;
    const Cache cache = make_cache(rng, DType::F16, n_slots, 1, head_dim);
    const std::vector<int32_t> positions = {1023, 1024, 1500, 2047, 2048, 2599};
    const auto n_tokens = static_cast<int64_t>(positions.size());
    const std::vector<float> queries = random_floats(rng, n_tokens * group * head_dim, -4.0f, 4.0f);
    std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
    std::vector<float> prefill(static_cast<size_t>(n_tokens * group * head_dim));
    attention_tokens(table, queries.data(), group * head_dim, n_tokens, group, positions.data(), cache.keys(),
                     cache.values(), 0, cache.slots.data(), head_dim, scratch.data(), prefill.data(), group * head_dim,
                     0.0f, nullptr);
    const std::vector<float> keys_rounded = rounded_to_bf16(cache.key_stored);
    const std::vector<float> values_rounded = rounded_to_bf16(cache.value_stored);
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<float> decode(static_cast<size_t>(group * head_dim));
      attention_group(table, queries.data() + t * group * head_dim, group, cache.keys(), cache.values(), 0,
                      cache.slots.data(), int64_t{positions[t]} + 1, head_dim, scratch.data(), decode.data(), 0.0f,
                      nullptr);
      ASSERT_EQ(0, std::memcmp(decode.data(), prefill.data() + t * group * head_dim, decode.size() * sizeof(float)))
          << "position " << positions[t];
      for (int64_t g = 0; g < group; ++g) {
        const std::vector<float> q = rounded_to_bf16(std::vector<float>(
            queries.begin() + (t * group + g) * head_dim, queries.begin() + (t * group + g + 1) * head_dim));
        const std::vector<double> expected =
            reference_attention(q.data(), {keys_rounded.data(), values_rounded.data(), head_dim, cache.slots.data()}, 0,
                                int64_t{positions[t]} + 1, head_dim);
        for (int64_t i = 0; i < head_dim; ++i)
          ASSERT_NEAR(decode[static_cast<size_t>(g * head_dim + i)], expected[static_cast<size_t>(i)],
                      std::ldexp(1.0, -8) * 1.05 + 1e-4)
              << isa_name(level) << " position " << positions[t] << " query " << g << " dim " << i;
      }
    }
  }
}

// On an AMX CPU with AMX-BF16, TANDEM_ATTENTION=bf16 at the AMX level runs the tile kernel;
// bf16-values (scores in f32) stays on the AVX-512 kernel, as does the AVX-512 level.
TEST(AttentionBf16Test, AmxLevelTakesTheTileKernelForBf16) {
  if (detect_isa() != Isa::Amx || !cpu_has_amx_bf16()) GTEST_SKIP() << "no AMX-BF16 on this machine";
  EXPECT_EQ(kernel_table(Isa::Amx, AttentionArithmetic::Bf16).attention_tokens, &amx::attention_tokens_bf16);
  EXPECT_EQ(kernel_table(Isa::Amx, AttentionArithmetic::Bf16).attention, &amx::attention_group_bf16);
  EXPECT_TRUE(kernel_table(Isa::Amx, AttentionArithmetic::Bf16).attention_on_tiles);
  EXPECT_FALSE(kernel_table(Isa::Amx, AttentionArithmetic::Bf16Values).attention_on_tiles);
  EXPECT_EQ(kernel_table(Isa::Amx, AttentionArithmetic::Bf16Values).attention_tokens,
            &avx512::attention_tokens_bf16_values);
  EXPECT_EQ(kernel_table(Isa::Avx512, AttentionArithmetic::Bf16).attention_tokens, &avx512::attention_tokens_bf16);
}

// The active table takes a bf16 kernel exactly when TANDEM_ATTENTION asks and the CPU can.
TEST(AttentionBf16Test, ActiveTableFollowsTandemAttention) {
  const char* requested = std::getenv("TANDEM_ATTENTION");
  AttentionArithmetic expected = AttentionArithmetic::F32;
  for (AttentionArithmetic candidate : {AttentionArithmetic::Bf16, AttentionArithmetic::Bf16Values})
    if (requested != nullptr && attention_arithmetic_name(candidate) == requested &&
        attention_arithmetic_available(active_isa(), candidate))
      expected = candidate;
  EXPECT_EQ(active_attention_arithmetic(), expected);
  EXPECT_EQ(kernel_table().attention_arithmetic, expected);
  EXPECT_EQ(kernel_table(active_isa()).attention_arithmetic, AttentionArithmetic::F32);
  EXPECT_EQ(attention_arithmetic_available(Isa::Avx2, AttentionArithmetic::Bf16), false);
}

}  // namespace
}  // namespace tandem
