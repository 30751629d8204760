// The device paged attention (backends/cuda/paged_attention.h) against the CPU's portable
// attention_group reading the same cache rows through the same slots: every KV type, GQA
// groups, sequences whose blocks are scattered over the pool, a one-position context and
// contexts across several tiles; and a token's output alone equals its output in a batch.
// Skips without a device.
#if defined(TANDEM_WITH_CUDA)
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/device_buffer.h"
#include "backends/cuda/paged_attention.h"
#include "base/quant.h"
#include "cuda/cuda_test_device.h"
#include "kernels/kernel_table.h"
#include "support/float_ulps.h"
#include "support/random_floats.h"

namespace tandem {
namespace {

struct Case {
  int64_t n_heads, n_kv_heads, head_dim;
};

struct Token {
  int32_t seq, position;
};

class CudaPagedAttention : public ::testing::TestWithParam<DType> {};

TEST_P(CudaPagedAttention, MatchesTheCpuKernelThroughTheBlockTables) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  const DType type = GetParam();
  std::mt19937 rng(23);
  const int32_t block_size = 16;
  const int64_t n_blocks = 13;
  const std::vector<int32_t> lengths = {1, 37, 70};  // blocks 1 + 3 + 5 of the pool's 13
  const std::vector<Token> tokens = {{0, 0}, {1, 36}, {1, 20}, {2, 69}, {2, 0}, {2, 33}, {2, 64}};
  // head_dim 8 (aidreams260K's) leaves most of a warp's lanes past the head: the kernel must
  // still keep every lane in its shuffles (a run on the H200 hung there). Block formats need
  // whole 32-element blocks, so that case is for F32/F16/BF16 rows only.
  std::vector<Case> cases = {Case{8, 2, 64}, Case{6, 6, 128}, Case{16, 1, 32}};
  if (type == DType::F32 || type == DType::F16 || type == DType::BF16) cases.push_back(Case{8, 4, 8});
  for (const Case& c : cases) {
    const int64_t kv_width = c.n_kv_heads * c.head_dim;
    const int64_t row_bytes = dtype_row_bytes(type, kv_width) + 64;  // padded, as the cache's rows are
    const int64_t n_slots = n_blocks * block_size;
    std::vector<uint8_t> keys(static_cast<size_t>(n_slots * row_bytes)), values(keys.size());
    for (int64_t s = 0; s < n_slots; ++s) {
      const std::vector<float> k = random_floats(rng, kv_width, -1.0f, 1.0f),
                               v = random_floats(rng, kv_width, -1.0f, 1.0f);
      quantize_row(type, k.data(), keys.data() + s * row_bytes, kv_width);
      quantize_row(type, v.data(), values.data() + s * row_bytes, kv_width);
    }
    // The pool's blocks shuffled among the sequences; tables padded to the longest.
    std::vector<int32_t> pool(static_cast<size_t>(n_blocks));
    for (int32_t b = 0; b < n_blocks; ++b) pool[static_cast<size_t>(b)] = b;
    std::shuffle(pool.begin(), pool.end(), rng);
    const int64_t max_blocks = 5;
    std::vector<int32_t> tables(lengths.size() * max_blocks, 0);
    size_t next = 0;
    for (size_t s = 0; s < lengths.size(); ++s)
      for (int64_t b = 0; b * block_size < lengths[s]; ++b)
        tables[s * max_blocks + static_cast<size_t>(b)] = pool[next++];

    const int64_t n_tokens = static_cast<int64_t>(tokens.size()), q_width = c.n_heads * c.head_dim;
    const std::vector<float> queries = random_floats(rng, n_tokens * q_width, -1.0f, 1.0f);
    std::vector<int32_t> positions, seq_ids;
    for (const Token& t : tokens) {
      positions.push_back(t.position);
      seq_ids.push_back(t.seq);
    }
    cuda::DeviceBuffer<uint8_t> keys_device(keys), values_device(values);
    cuda::DeviceBuffer<int32_t> tables_device(tables), positions_device(positions), seq_ids_device(seq_ids);
    cuda::DeviceBuffer<float> queries_device(queries), out_device(n_tokens * q_width);
    const cuda::PagedKv kv{keys_device.data(), values_device.data(), row_bytes, row_bytes, type,
                           block_size,         tables_device.data(), max_blocks};
    cuda::paged_attention(queries_device.data(), q_width, n_tokens, c.n_heads, c.n_kv_heads, c.head_dim,
                          positions_device.data(), seq_ids_device.data(), kv, out_device.data(), q_width, nullptr);
    const std::vector<float> got = out_device.download();

    const int64_t group = c.n_heads / c.n_kv_heads;
    const KvRows key_rows{keys.data(), row_bytes, type}, value_rows{values.data(), row_bytes, type};
    std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(group))),
        expected(static_cast<size_t>(group * c.head_dim));
    for (int64_t t = 0; t < n_tokens; ++t) {
      const Token& token = tokens[static_cast<size_t>(t)];
      std::vector<int32_t> slots;
      for (int32_t p = 0; p <= token.position; ++p)
        slots.push_back(tables[static_cast<size_t>(token.seq) * max_blocks + static_cast<size_t>(p / block_size)] *
                            block_size +
                        p % block_size);
      for (int64_t h = 0; h < c.n_kv_heads; ++h) {
        portable::attention_group(queries.data() + t * q_width + h * group * c.head_dim, group, key_rows, value_rows,
                                  h * c.head_dim, slots.data(), token.position + 1, c.head_dim, scratch.data(),
                                  expected.data(), 0.0f, nullptr, nullptr);
        for (int64_t i = 0; i < group * c.head_dim; ++i)
          ASSERT_NEAR(got[static_cast<size_t>(t * q_width + h * group * c.head_dim + i)],
                      expected[static_cast<size_t>(i)], 2e-5f)
              << dtype_name(type) << " heads " << c.n_heads << "/" << c.n_kv_heads << " head_dim " << c.head_dim
              << " token " << t << " kv head " << h << " element " << i;
      }
    }

    // Token 3 alone: the same bits as in the batch.
    const std::vector<float> query_alone(queries.begin() + 3 * q_width, queries.begin() + 4 * q_width);
    cuda::DeviceBuffer<float> query_alone_device(query_alone), out_alone(q_width);
    cuda::DeviceBuffer<int32_t> position_alone(std::vector<int32_t>{positions[3]}),
        seq_alone(std::vector<int32_t>{seq_ids[3]});
    cuda::paged_attention(query_alone_device.data(), q_width, 1, c.n_heads, c.n_kv_heads, c.head_dim,
                          position_alone.data(), seq_alone.data(), kv, out_alone.data(), q_width, nullptr);
    const std::vector<float> alone = out_alone.download();
    for (int64_t i = 0; i < q_width; ++i)
      ASSERT_TRUE(same_bits(alone[static_cast<size_t>(i)], got[static_cast<size_t>(3 * q_width + i)]))
          << "element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryKvType, CudaPagedAttention,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(dtype_name(info.param));
                         });

}  // namespace
}  // namespace tandem
#endif
