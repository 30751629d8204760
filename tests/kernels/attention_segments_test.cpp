// Attention over contexts longer than one segment (kAttentionSegment positions), at every CPU
// level this machine has: a group's result stays near the double computation (F32, F16, Q8_0
// and mixed K/V rows; head sizes 64, 80, 128, 256; GQA groups 1-8; soft-cap and sinks); a run of
// tokens crossing segment boundaries equals each token alone, bit for bit, however the run is
// cut (the engine's chunking); and the segments' partial results, computed one by one as decode
// hands them to different threads and combined, equal the whole, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/quant.h"
#include "kernels/attention.h"
#include "kernels/kernel_table.h"
#include "support/attention_reference.h"
#include "support/cpu_levels.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

// One layer's K (or V) rows stored as `type`, and the same rows dequantized to floats (what the
// double reference reads: the test is about the kernels' arithmetic, not the type's rounding).
struct Rows {
  int64_t width = 0, row_bytes = 0;
  DType type = DType::F32;
  std::vector<uint8_t> stored;     // [n_slots, row_bytes]
  std::vector<float> dequantized;  // [n_slots, width]
  KvRows rows() const { return {stored.data(), row_bytes, type}; }
};

Rows make_rows(std::mt19937& rng, DType type, int64_t n_slots, int64_t width) {
  Rows rows;
  rows.width = width, rows.type = type, rows.row_bytes = dtype_row_bytes(type, width);
  const std::vector<float> original = random_floats(rng, n_slots * width, -1.0f, 1.0f);
  rows.stored.resize(static_cast<size_t>(n_slots * rows.row_bytes));
  rows.dequantized.resize(original.size());
  for (int64_t s = 0; s < n_slots; ++s) {
    quantize_row(type, original.data() + s * width, rows.stored.data() + s * rows.row_bytes, width);
    dequantize_row(type, rows.stored.data() + s * rows.row_bytes, rows.dequantized.data() + s * width, width);
  }
  return rows;
}

std::vector<int32_t> shuffled_slots(std::mt19937& rng, int64_t n) {
  std::vector<int32_t> slots(static_cast<size_t>(n));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  return slots;
}

struct Case {
  Isa isa;
  DType k, v;
  int64_t head_dim, group;
  float softcap = 0.0f;
  bool sinks = false;
  std::string name() const {
    return std::string(isa_name(isa)) + " K " + std::string(dtype_name(k)) + " V " + std::string(dtype_name(v)) +
           " head_dim " + std::to_string(head_dim) + " group " + std::to_string(group) + " softcap " +
           std::to_string(softcap) + (sinks ? " sinks" : "");
  }
};

std::vector<Case> cases() {
  std::vector<Case> all;
  const DType type_pairs[][2] = {{DType::F32, DType::F32}, {DType::F16, DType::F16}, {DType::Q8_0, DType::F16}};
  for (Isa isa : supported_levels()) {
    // A level whose attention is the level below's (the AMX table keeps AVX-512's f32 kernels:
    // kernels/amx/amx_table.cpp) would repeat its cases bit for bit.
    if (isa != Isa::Scalar && kernel_table(isa).attention_tokens ==
                                  kernel_table(static_cast<Isa>(static_cast<int>(isa) - 1)).attention_tokens)
      continue;
    for (const auto& types : type_pairs)
      for (int64_t head_dim : {64, 80, 128, 256})
        for (int64_t group : {1, 3, 8}) {
          if (head_dim % 32 != 0 && (types[0] == DType::Q8_0 || types[1] == DType::Q8_0)) continue;
          // The soft-cap and the sinks on one group size each, to keep the run short.
          all.push_back({isa, types[0], types[1], head_dim, group, group == 3 ? 30.0f : 0.0f, group == 8});
        }
  }
  return all;
}

// The keys, values, slots and queries of one case over n_slots positions.
struct Fixture {
  Case c;
  Rows keys, values;
  std::vector<int32_t> slots;
  std::vector<float> sinks;  // [group]
  int64_t kv_offset;         // the second of two KV heads

  Fixture(const Case& c_, std::mt19937& rng, int64_t n_slots)
      : c(c_),
        keys(make_rows(rng, c_.k, n_slots, 2 * c_.head_dim)),
        values(make_rows(rng, c_.v, n_slots, 2 * c_.head_dim)),
        slots(shuffled_slots(rng, n_slots)),
        sinks(random_floats(rng, c_.group, -2.0f, 6.0f)),
        kv_offset(c_.head_dim) {}

  const float* sink_logits() const { return c.sinks ? sinks.data() : nullptr; }

  std::vector<float> group(const float* queries, int64_t n_ctx) const {
    std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(c.group)));
    std::vector<float> out(static_cast<size_t>(c.group * c.head_dim));
    attention_group(kernel_table(c.isa), queries, c.group, keys.rows(), values.rows(), kv_offset, slots.data(), n_ctx,
                    c.head_dim, scratch.data(), out.data(), c.softcap, sink_logits());
    return out;
  }

  std::vector<double> reference(const float* query, int64_t g, int64_t n_ctx) const {
    return reference_attention(query, {keys.dequantized.data(), values.dequantized.data(), keys.width, slots.data()},
                               kv_offset, n_ctx, c.head_dim, c.softcap,
                               c.sinks ? std::optional<double>(sinks[static_cast<size_t>(g)]) : std::nullopt);
  }
};

// Scores of standard deviation ~2.3 (queries in ±4 against keys in ±1, scaled by sqrt(head_dim)):
// the segments' maxima differ, so the combination's rescaling matters.
constexpr float kQueryBound = 4.0f;

TEST(AttentionSegmentsTest, LongContextsStayNearDouble) {
  std::mt19937 rng(41);
  const int64_t n_slots = 2 * kAttentionSegment + 60;
  for (const Case& c : cases()) {
    const Fixture fixture(c, rng, n_slots);
    const std::vector<float> queries = random_floats(rng, c.group * c.head_dim, -kQueryBound, kQueryBound);
    for (int64_t n_ctx :
         {kAttentionSegment, kAttentionSegment + 1, 2 * kAttentionSegment - 1, 2 * kAttentionSegment, n_slots}) {
      const std::vector<float> out = fixture.group(queries.data(), n_ctx);
      for (int64_t g = 0; g < c.group; ++g) {
        const std::vector<double> expected = fixture.reference(queries.data() + g * c.head_dim, g, n_ctx);
        for (int64_t i = 0; i < c.head_dim; ++i)
          ASSERT_NEAR(out[static_cast<size_t>(g * c.head_dim + i)], expected[static_cast<size_t>(i)], 2e-5)
              << c.name() << " n_ctx " << n_ctx << " query " << g << " dim " << i;
      }
    }
  }
}

// A prefill chunk whose tokens straddle segment boundaries (some within the first segment, some
// past one or two boundaries) equals its tokens alone, and the chunk cut in two pieces equals it
// whole: a query's bits do not depend on its companions nor on the chunk size.
TEST(AttentionSegmentsTest, TokensAcrossSegmentsEqualTokensAloneAndAnyCut) {
  std::mt19937 rng(42);
  const int64_t n_slots = 2 * kAttentionSegment + 70;
  for (const Case& c : cases()) {
    if (c.head_dim == 256 && c.group == 8) continue;  // the longest case; 128 x 8 covers the shape
    const Fixture fixture(c, rng, n_slots);
    for (int64_t first : {kAttentionSegment - 20, 2 * kAttentionSegment - 3}) {
      const int64_t n_tokens = 40, stride = c.group * c.head_dim;
      std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
      std::iota(positions.begin(), positions.end(), static_cast<int32_t>(first));
      const std::vector<float> queries = random_floats(rng, n_tokens * stride, -kQueryBound, kQueryBound);
      std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(c.group)));
      auto run = [&](int64_t begin, int64_t end, std::vector<float>& out) {
        attention_tokens(kernel_table(c.isa), queries.data() + begin * stride, stride, end - begin, c.group,
                         positions.data() + begin, fixture.keys.rows(), fixture.values.rows(), fixture.kv_offset,
                         fixture.slots.data(), c.head_dim, scratch.data(), out.data() + begin * stride, stride,
                         c.softcap, fixture.sink_logits());
      };
      std::vector<float> whole(static_cast<size_t>(n_tokens * stride)), cut(whole.size());
      run(0, n_tokens, whole);
      run(0, 17, cut);
      run(17, n_tokens, cut);
      ASSERT_EQ(0, std::memcmp(whole.data(), cut.data(), whole.size() * sizeof(float)))
          << c.name() << " from " << first;
      for (int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> alone = fixture.group(queries.data() + t * stride, positions[t] + 1);
        ASSERT_EQ(0, std::memcmp(alone.data(), whole.data() + t * stride, alone.size() * sizeof(float)))
            << c.name() << " token at " << positions[t];
      }
    }
  }
}

// What decode does with a long context: each segment's partial result on its own (in any order,
// as threads finish them), then combine_attention_segments — the same bits as attention_group.
TEST(AttentionSegmentsTest, SegmentPartialsCombineToTheWhole) {
  std::mt19937 rng(43);
  const int64_t n_ctx = 3 * kAttentionSegment + 17;
  for (const Case& c : cases()) {
    const Fixture fixture(c, rng, n_ctx);
    const std::vector<float> queries = random_floats(rng, c.group * c.head_dim, -kQueryBound, kQueryBound);
    const int64_t n_segments = attention_segments(n_ctx), stride = c.group * c.head_dim;
    ASSERT_EQ(n_segments, 4);
    std::vector<float> accs(static_cast<size_t>(n_segments * stride));
    std::vector<AttentionPartial> partials(static_cast<size_t>(n_segments * c.group));
    std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(c.group)));
    for (int64_t s : {3, 1, 0, 2}) {
      const int64_t first = s * kAttentionSegment;
      attention_group_partial(kernel_table(c.isa), queries.data(), c.group, fixture.keys.rows(), fixture.values.rows(),
                              fixture.kv_offset, fixture.slots.data() + first,
                              std::min(kAttentionSegment, n_ctx - first), c.head_dim, scratch.data(),
                              accs.data() + s * stride, c.softcap, partials.data() + s * c.group);
    }
    std::vector<float> combined(static_cast<size_t>(stride));
    combine_attention_segments(accs.data(), stride, partials.data(), c.group, n_segments, c.group, c.head_dim,
                               fixture.sink_logits(), combined.data());
    const std::vector<float> whole = fixture.group(queries.data(), n_ctx);
    ASSERT_EQ(0, std::memcmp(whole.data(), combined.data(), whole.size() * sizeof(float))) << c.name();
  }
}

// Up to one segment nothing is combined: the kernel's own normalisation, as before segments.
TEST(AttentionSegmentsTest, OneSegmentIsTheKernelAlone) {
  std::mt19937 rng(44);
  for (Isa isa : supported_levels()) {
    const Case c{isa, DType::F16, DType::F16, 64, 4, 0.0f, true};
    const Fixture fixture(c, rng, kAttentionSegment);
    const std::vector<float> queries = random_floats(rng, c.group * c.head_dim, -kQueryBound, kQueryBound);
    std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(c.group)));
    std::vector<float> direct(static_cast<size_t>(c.group * c.head_dim));
    kernel_table(isa).attention(queries.data(), c.group, fixture.keys.rows(), fixture.values.rows(), fixture.kv_offset,
                                fixture.slots.data(), kAttentionSegment, c.head_dim, scratch.data(), direct.data(),
                                0.0f, fixture.sink_logits(), nullptr);
    const std::vector<float> out = fixture.group(queries.data(), kAttentionSegment);
    ASSERT_EQ(0, std::memcmp(direct.data(), out.data(), out.size() * sizeof(float))) << c.name();
  }
}

}  // namespace
}  // namespace tandem
