// Attention over K/V rows stored as F16, BF16, Q8_0 and Q4_0, at every CPU level this machine
// has (scalar, AVX2, AVX-512): each level's convert_kv_rows gives dequantize_row's floats bit
// for bit; each level's attention on typed rows equals, bit for bit, the same level on F32 rows
// holding the dequantized values (the kernels convert a block at a time and then compute as on
// F32); it stays within a per-type tolerance of a double computation on the original rows; and
// a token's result is the same alone or in a run of tokens (attention_tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/quant.h"
#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "kv/kv_types.h"
#include "support/attention_reference.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

const DType kStoredTypes[] = {DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};

std::vector<Isa> levels_here() {
  std::vector<Isa> levels;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (static_cast<int>(isa) <= static_cast<int>(detect_isa())) levels.push_back(isa);
  return levels;
}

// Uniform in [-bound, bound).
std::vector<float> random_floats(std::mt19937& rng, int64_t n, float bound) {
  return tandem::random_floats(rng, n, -bound, bound);
}

// One layer's K (or V) rows three ways: the original floats, stored as `type` (with padding
// after each row, as the cache has), and the stored values dequantized back to floats.
struct StoredRows {
  int64_t width = 0, row_bytes = 0;
  DType type = DType::F32;
  std::vector<float> original;     // [n_slots, width]
  std::vector<uint8_t> stored;     // [n_slots, row_bytes]
  std::vector<float> dequantized;  // [n_slots, width]

  KvRows rows() const { return {stored.data(), row_bytes, type}; }
  KvRows dequantized_rows() const { return f32_kv_rows(dequantized.data(), width); }
};

StoredRows store_rows(std::mt19937& rng, DType type, int64_t n_slots, int64_t width) {
  StoredRows rows;
  rows.width = width, rows.type = type;
  rows.row_bytes = dtype_row_bytes(type, width) + 40;  // a stride past the row, not a multiple of 64
  rows.original = random_floats(rng, n_slots * width, 1.0f);
  rows.stored.assign(static_cast<size_t>(n_slots * rows.row_bytes), 0xAB);
  rows.dequantized.resize(rows.original.size());
  for (int64_t s = 0; s < n_slots; ++s) {
    quantize_row(type, rows.original.data() + s * width, rows.stored.data() + s * rows.row_bytes, width);
    dequantize_row(type, rows.stored.data() + s * rows.row_bytes, rows.dequantized.data() + s * width, width);
  }
  return rows;
}

std::vector<int32_t> shuffled_slots(std::mt19937& rng, int64_t n_slots) {
  std::vector<int32_t> slots(static_cast<size_t>(n_slots));
  std::iota(slots.begin(), slots.end(), 0);
  std::shuffle(slots.begin(), slots.end(), rng);
  return slots;
}

std::vector<float> run_group(Isa isa, const float* queries, int64_t group, const KvRows& keys, const KvRows& values,
                             int64_t kv_offset, const std::vector<int32_t>& slots, int64_t n_ctx, int64_t head_dim) {
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
  std::vector<float> out(static_cast<size_t>(group * head_dim));
  kernel_table(isa).attention(queries, group, keys, values, kv_offset, slots.data(), n_ctx, head_dim, scratch.data(),
                              out.data(), 0.0f, nullptr, nullptr);
  return out;
}

// One query head's attention in double over the original (unrounded) rows.
std::vector<double> attention_in_double(const float* q, const StoredRows& keys, const StoredRows& values,
                                        int64_t kv_offset, const std::vector<int32_t>& slots, int64_t n_ctx,
                                        int64_t head_dim) {
  return reference_attention(q, {keys.original.data(), values.original.data(), keys.width, slots.data()}, kv_offset,
                             n_ctx, head_dim);
}

// Largest |error| of an attention output element (|v| <= 1) on typed rows against the double
// computation on the original rows: the rounding of the stored type, nothing else.
double tolerance(DType k, DType v) {
  auto of = [](DType type) {
    switch (type) {
      case DType::F16: return 3e-3;
      case DType::BF16: return 2e-2;
      case DType::Q8_0: return 3e-2;
      case DType::Q4_0: return 0.25;
      default: return 1e-5;
    }
  };
  return std::max(of(k), of(v));
}

TEST(ConvertKvRowsTest, EveryLevelGivesDequantizeRowsFloats) {
  std::mt19937 rng(1);
  for (Isa isa : levels_here())
    for (DType type : kStoredTypes) {
      const int64_t block = dtype_block_geometry(type).first;
      for (int64_t n : {1, 7, 8, 15, 16, 17, 33, 64, 96, 128, 256}) {
        if (n % block != 0) continue;
        const int64_t width = 3 * n, n_rows = 5;
        const StoredRows rows = store_rows(rng, type, 9, width);
        const std::vector<int64_t> offsets = {8 * rows.row_bytes, 0, 3 * rows.row_bytes, 3 * rows.row_bytes,
                                              5 * rows.row_bytes};
        for (int64_t element_offset : {int64_t{0}, n, 2 * n}) {
          std::vector<float> out(static_cast<size_t>(n_rows * n), -7.0f);
          kernel_table(isa).convert_kv_rows(rows.rows(), offsets.data(), n_rows, element_offset, n, out.data());
          for (int64_t r = 0; r < n_rows; ++r) {
            const int64_t slot = offsets[r] / rows.row_bytes;
            ASSERT_EQ(0, std::memcmp(out.data() + r * n, rows.dequantized.data() + slot * width + element_offset,
                                     static_cast<size_t>(n) * sizeof(float)))
                << isa_name(isa) << " " << dtype_name(type) << " n " << n << " offset " << element_offset << " row "
                << r;
          }
        }
      }
    }
}

struct TypePair {
  DType k, v;
};

std::vector<TypePair> type_pairs() {
  std::vector<TypePair> pairs;
  for (DType type : kStoredTypes) pairs.push_back({type, type});
  pairs.push_back({DType::Q8_0, DType::F16});  // K and V of different types (and row sizes)
  pairs.push_back({DType::F32, DType::Q4_0});
  return pairs;
}

const std::vector<int64_t> kContextLengths = {1, 2, 9, 16, 17, 63, 64, 65, 130, 200};

TEST(AttentionKvTypesTest, TypedRowsEqualF32RowsOfTheSameValuesAndStayNearDouble) {
  std::mt19937 rng(2);
  const int64_t n_slots = 200, n_kv_heads = 2;
  for (Isa isa : levels_here())
    for (const TypePair& types : type_pairs())
      for (int64_t head_dim : {32, 64, 128, 8, 24, 40}) {
        // The block types need whole blocks of 32 per head.
        if (head_dim % dtype_block_geometry(types.k).first != 0 || head_dim % dtype_block_geometry(types.v).first != 0)
          continue;
        const StoredRows keys = store_rows(rng, types.k, n_slots, n_kv_heads * head_dim);
        const StoredRows values = store_rows(rng, types.v, n_slots, n_kv_heads * head_dim);
        const std::vector<int32_t> slots = shuffled_slots(rng, n_slots);
        for (int64_t group : {1, 5}) {
          const std::vector<float> queries = random_floats(rng, group * head_dim, 8.0f);
          for (int64_t n_ctx : kContextLengths) {
            const int64_t kv_offset = (n_ctx % n_kv_heads) * head_dim;
            const std::string what = std::string(isa_name(isa)) + " K " + std::string(dtype_name(types.k)) + " V " +
                                     std::string(dtype_name(types.v)) + " head_dim " + std::to_string(head_dim) +
                                     " group " + std::to_string(group) + " n_ctx " + std::to_string(n_ctx);
            const std::vector<float> typed =
                run_group(isa, queries.data(), group, keys.rows(), values.rows(), kv_offset, slots, n_ctx, head_dim);
            const std::vector<float> f32 = run_group(isa, queries.data(), group, keys.dequantized_rows(),
                                                     values.dequantized_rows(), kv_offset, slots, n_ctx, head_dim);
            ASSERT_EQ(0, std::memcmp(typed.data(), f32.data(), typed.size() * sizeof(float))) << what;
            for (int64_t g = 0; g < group; ++g) {
              const std::vector<double> expected =
                  attention_in_double(queries.data() + g * head_dim, keys, values, kv_offset, slots, n_ctx, head_dim);
              for (int64_t i = 0; i < head_dim; ++i)
                ASSERT_NEAR(typed[g * head_dim + i], expected[i], tolerance(types.k, types.v))
                    << what << " query " << g << " dim " << i;
            }
          }
        }
      }
}

// A run of tokens of one sequence through attention_tokens equals each token alone through
// attention_group, bit for bit, on typed rows (the engine's batch invariance rests on it).
TEST(AttentionKvTypesTest, TokensInARunEqualTokensAlone) {
  std::mt19937 rng(3);
  const int64_t n_slots = 160, group = 4;
  for (Isa isa : levels_here())
    for (const TypePair& types : type_pairs())
      for (int64_t head_dim : {32, 64}) {
        const StoredRows keys = store_rows(rng, types.k, n_slots, 2 * head_dim);
        const StoredRows values = store_rows(rng, types.v, n_slots, 2 * head_dim);
        const std::vector<int32_t> slots = shuffled_slots(rng, n_slots);
        for (int32_t first : {0, 13, 60, 120}) {
          const int64_t n_tokens = 19, stride = group * head_dim;
          std::vector<int32_t> positions(static_cast<size_t>(n_tokens));
          std::iota(positions.begin(), positions.end(), first);
          const std::vector<float> queries = random_floats(rng, n_tokens * stride, 8.0f);
          std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group)));
          std::vector<float> together(static_cast<size_t>(n_tokens * stride));
          kernel_table(isa).attention_tokens(queries.data(), stride, n_tokens, group, positions.data(), keys.rows(),
                                             values.rows(), head_dim, slots.data(), head_dim, scratch.data(),
                                             together.data(), stride, 0.0f, nullptr, nullptr);
          for (int64_t t = 0; t < n_tokens; ++t) {
            const std::vector<float> alone = run_group(isa, queries.data() + t * stride, group, keys.rows(),
                                                       values.rows(), head_dim, slots, positions[t] + 1, head_dim);
            ASSERT_EQ(0, std::memcmp(alone.data(), together.data() + t * stride, alone.size() * sizeof(float)))
                << isa_name(isa) << " K " << dtype_name(types.k) << " V " << dtype_name(types.v) << " head_dim "
                << head_dim << " token " << t << " at " << positions[t];
          }
        }
      }
}

}  // namespace
}  // namespace tandem
