// Tensor-parallel slices in one process (model/tensor_slice.h): column slices laid side by side
// are the whole matrix, byte for byte (a slice one block off fails); the sum of the slices'
// partial products is the whole product within rounding; T ranks, each a thread with its own
// slice, Forward and KV cache, summing their row-parallel outputs in rank order, give the whole
// model's logits within rounding and its greedy tokens, for llama (GQA, KV heads split),
// KV heads replicated (fewer than ranks), qwen3 (Q/K norms, tied head) and gemma3 (post norms,
// local layers), F32 and Q8_0; each rank holds its share of the bytes; shapes that do not
// split are one-line errors naming --tensor-parallel; `tandem info --tensor-parallel T` shows each share.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/quant.h"
#include "base/thread_pool.h"
#include "kernels/matmul.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/tensor_slice.h"
#include "support/random_model.h"
#include "support/run_binary.h"

namespace tandem {
namespace {

using test_support::RandomModelSpec;
using test_support::TempDir;

// A [rows, cols] matrix of random values stored as `dtype`.
struct StoredMatrix {
  std::vector<uint8_t> bytes;
  TensorView view;
};
StoredMatrix random_stored(int64_t rows, int64_t cols, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  StoredMatrix m;
  test_support::detail::random_matrix(rng, rows, cols, dtype, 1.0f, m.bytes);
  m.view = make_view(m.bytes.data(), dtype, {rows, cols});
  return m;
}

TEST(TensorSlice, ColumnSlicesSideBySideAreTheMatrix) {
  for (DType dtype : {DType::F32, DType::Q8_0, DType::Q4_0, DType::Q4_K}) {
    const int64_t block = dtype_block_geometry(dtype).first;
    const int64_t cols = 4 * std::max<int64_t>(block, 8), rows = 5;
    const StoredMatrix m = random_stored(rows, cols, dtype, 7);
    for (int64_t t : {2, 4}) {
      std::vector<std::vector<uint8_t>> slices(static_cast<size_t>(t));
      std::vector<TensorView> views;
      for (int64_t r = 0; r < t; ++r)
        views.push_back(copy_columns(m.view, r * cols / t, cols / t, "test", slices[static_cast<size_t>(r)]));
      // Row by row, the slices' bytes in rank order are the row's bytes.
      for (int64_t row = 0; row < rows; ++row) {
        std::vector<uint8_t> joined;
        for (const TensorView& v : views) joined.insert(joined.end(), v.row(row), v.row(row) + v.row_bytes());
        ASSERT_EQ(joined, std::vector<uint8_t>(m.view.row(row), m.view.row(row) + m.view.row_bytes()))
            << dtype_name(dtype) << " T=" << t << " row " << row;
      }
      // One block further along is other bytes: the comparison above can fail.
      std::vector<uint8_t> shifted;
      const TensorView off = copy_columns(m.view, block, cols / t, "test", shifted);
      EXPECT_NE(std::vector<uint8_t>(off.row(0), off.row(0) + off.row_bytes()),
                std::vector<uint8_t>(views[0].row(0), views[0].row(0) + views[0].row_bytes()));
    }
  }
}

TEST(TensorSlice, PartialProductsSumToTheProduct) {
  ThreadPool pool(1);
  MatmulScratch scratch;
  for (DType dtype : {DType::F32, DType::Q8_0, DType::Q4_K}) {
    const int64_t cols = 1024, rows = 48, n_tokens = 3;
    const StoredMatrix m = random_stored(rows, cols, dtype, 11);
    std::vector<float> x(static_cast<size_t>(n_tokens * cols));
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float& v : x) v = uniform(rng);
    std::vector<float> whole(static_cast<size_t>(n_tokens * rows));
    matmul(m.view, x.data(), n_tokens, whole.data(), pool, scratch);
    for (int64_t t : {2, 4}) {
      const int64_t part = cols / t;
      std::vector<float> sum(whole.size(), 0.0f), out(whole.size()), x_part(static_cast<size_t>(n_tokens * part));
      for (int64_t r = 0; r < t; ++r) {
        std::vector<uint8_t> storage;
        const TensorView slice = copy_columns(m.view, r * part, part, "test", storage);
        for (int64_t token = 0; token < n_tokens; ++token)
          std::copy_n(x.data() + token * cols + r * part, part, x_part.data() + token * part);
        matmul(slice, x_part.data(), n_tokens, out.data(), pool, scratch);
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += out[i];
      }
      for (size_t i = 0; i < sum.size(); ++i)
        ASSERT_NEAR(sum[i], whole[i], 1e-4f * (1.0f + std::abs(whole[i])))
            << dtype_name(dtype) << " T=" << t << " " << i;
    }
  }
}

TEST(TensorSlice, CutsInsideABlockAndUnevenShapesAreRefused) {
  const StoredMatrix m = random_stored(4, 96, DType::Q8_0, 5);
  std::vector<uint8_t> storage;
  try {
    copy_columns(m.view, 48, 48, "ffn_down", storage);
    FAIL() << "a Q8_0 cut at column 48 was taken";
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("ffn_down (Q8_0, [4, 96]) would be cut at column 48 of 96, inside a block of 32"),
        std::string::npos)
        << e.what();
  }
  ModelConfig c;
  c.n_heads = 6, c.n_kv_heads = 3, c.d_ff = 96, c.head_dim = 16, c.d_model = 96;
  auto refused = [&](const ModelConfig& config, int64_t t, const std::string& message) {
    try {
      tensor_slice_shape(config, {0, t});
      ADD_FAILURE() << "T=" << t << " was taken";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  refused(c, 4, "--tensor-parallel 4: the model's 6 query heads do not split into 4 equal parts");
  refused(c, 2, "--tensor-parallel 2: the model's 3 KV heads neither split into 2 equal parts nor divide 2");
  ModelConfig moe = c;
  moe.n_experts = 8;
  refused(moe, 3, "--tensor-parallel 3: a mixture-of-experts model (8 experts) is not split over ranks");
  ModelConfig ffn = c;
  ffn.d_ff = 100;
  refused(ffn, 3, "--tensor-parallel 3: the model's FFN width 100 does not split into 3 equal parts");
  // 6 heads over 3 KV heads on 6 ranks: each rank one query head, KV heads replicated in pairs.
  for (int64_t r = 0; r < 6; ++r) {
    const TensorSliceShape s = tensor_slice_shape(c, {r, 6});
    EXPECT_EQ(s.q_head_first, r);
    EXPECT_EQ(s.n_q_heads, 1);
    EXPECT_EQ(s.kv_head_first, r / 2);
    EXPECT_EQ(s.n_kv_heads, 1);
  }
}

// T ranks in one process: each rank's all_reduce hands its rows over, waits for every rank's,
// and sums them in rank order ((p0 + p1) + p2 ...), as dist/mpi_all_reduce.h does.
class ThreadPartialSums {
 public:
  explicit ThreadPartialSums(int64_t n_ranks) : rows_(static_cast<size_t>(n_ranks)), barrier_(n_ranks) {}
  class Rank final : public PartialSums {
   public:
    Rank(ThreadPartialSums& shared, int64_t rank) : shared_(shared), rank_(rank) {}
    void all_reduce(std::span<float> rows) override {
      shared_.rows_[static_cast<size_t>(rank_)] = rows;
      shared_.barrier_.arrive_and_wait();
      sum_.assign(rows.size(), 0.0f);
      std::copy(shared_.rows_[0].begin(), shared_.rows_[0].end(), sum_.begin());
      for (size_t r = 1; r < shared_.rows_.size(); ++r)
        for (size_t i = 0; i < rows.size(); ++i) sum_[i] += shared_.rows_[r][i];
      shared_.barrier_.arrive_and_wait();  // every rank has read every rank's rows
      std::copy(sum_.begin(), sum_.end(), rows.begin());
    }

   private:
    ThreadPartialSums& shared_;
    int64_t rank_;
    std::vector<float> sum_;
  };

 private:
  std::vector<std::span<float>> rows_;
  std::barrier<> barrier_;
};

struct SliceCase {
  std::string name;
  RandomModelSpec spec;
  int64_t n_ranks;
};
void PrintTo(const SliceCase& c, std::ostream* out) { *out << c.name; }

std::vector<SliceCase> slice_cases() {
  RandomModelSpec llama;  // 4 heads of 16, 2 KV heads, FFN 128: Q8_0 halves are whole blocks
  llama.d_model = 64, llama.n_heads = 4, llama.n_kv_heads = 2, llama.d_ff = 128, llama.n_layers = 2;
  llama.vocab_size = 67, llama.seed = 301;
  RandomModelSpec mha = llama;  // 4 ranks over 2 KV heads: each KV head on two ranks; heads of 32
  mha.d_model = 128, mha.seed = 302;
  RandomModelSpec qwen3 = llama;
  qwen3.architecture = "qwen3", qwen3.head_size = 32, qwen3.tied_output = true, qwen3.seed = 303;
  RandomModelSpec gemma3 = llama;
  gemma3.architecture = "gemma3", gemma3.head_size = 32, gemma3.sliding_window = 6, gemma3.window_pattern = 2;
  gemma3.tied_output = true, gemma3.seed = 304;
  std::vector<SliceCase> all;
  for (DType dtype : {DType::F32, DType::Q8_0})
    for (SliceCase c : {SliceCase{"llama_gqa_t2", llama, 2}, SliceCase{"kv_replicated_t4", mha, 4},
                        SliceCase{"qwen3_t2", qwen3, 2}, SliceCase{"gemma3_t2", gemma3, 2}}) {
      c.spec.dtype = dtype;
      // Q8_0 over 4 ranks of heads of 32 and FFN columns of 32: whole blocks still.
      c.name += dtype == DType::F32 ? "_f32" : "_q8_0";
      all.push_back(c);
    }
  return all;
}

class TensorSliceForwardTest : public ::testing::TestWithParam<SliceCase> {};

// A prompt, then greedy decoding: the whole model in one Forward, and T ranks in T threads.
TEST_P(TensorSliceForwardTest, RanksTogetherGiveTheWholeModelsLogitsAndTokens) {
  TempDir dir;
  const SliceCase& c = GetParam();
  const std::string path = dir.file(c.name + "_" + std::to_string(::getpid()) + ".gguf");
  test_support::write_random_model(c.spec, path);
  const std::shared_ptr<const Model> whole = load_model(path);
  std::vector<std::shared_ptr<const Model>> ranks;
  for (int64_t r = 0; r < c.n_ranks; ++r)
    ranks.push_back(load_model(path, {.tensor_slice = TensorSlice{r, c.n_ranks}}));

  // Each rank holds its share: its heads' KV, a T-th of every split matrix, the head on rank 0 only.
  const ModelConfig& wc = whole->config;
  for (int64_t r = 0; r < c.n_ranks; ++r) {
    const Model& m = *ranks[static_cast<size_t>(r)];
    EXPECT_EQ(m.config.n_heads * c.n_ranks, wc.n_heads);
    EXPECT_EQ(m.config.d_ff * c.n_ranks, wc.d_ff);
    EXPECT_EQ(m.config.n_kv_heads, std::max<int64_t>(1, wc.n_kv_heads / c.n_ranks));
    const LayerWeights& l = m.weights.layers[0];
    const LayerWeights& lw = whole->weights.layers[0];
    EXPECT_EQ(l.wq.n_bytes() * c.n_ranks, lw.wq.n_bytes());
    EXPECT_EQ(l.wo.n_bytes() * c.n_ranks, lw.wo.n_bytes());
    EXPECT_EQ(l.w_down.n_bytes() * c.n_ranks, lw.w_down.n_bytes());
    EXPECT_EQ(l.w_gate.n_bytes() * c.n_ranks, lw.w_gate.n_bytes());
    EXPECT_EQ(m.weights.output.data != nullptr, r == 0) << r;  // a tied head too: the embedding stays
    EXPECT_LT(m.weight_bytes_total(), whole->weight_bytes_total());
  }

  const int32_t block_size = 4;
  const int64_t n_blocks = 16;
  std::vector<int32_t> prompt = {3, 17, 42, 5, 9, 60, 1, 33, 21};
  const int n_decode = 12;
  // Runs the prompt then greedy steps on `forwards` (rank r's batch wants logits only on rank 0).
  auto generate = [&](std::vector<Forward*> forwards, std::vector<KvCache*> caches, std::vector<float>& prompt_logits) {
    std::vector<int32_t> tokens;
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    for (int32_t b = 0; b < n_blocks; ++b) table[static_cast<size_t>(b)] = n_blocks - 1 - b;
    const int64_t vocab = wc.vocab_size;
    int32_t position = 0;
    std::vector<int32_t> step = prompt;
    for (int i = 0; i <= n_decode; ++i) {
      std::vector<std::vector<float>> outs(forwards.size());
      std::vector<std::thread> threads;
      for (size_t r = 0; r < forwards.size(); ++r)
        threads.emplace_back([&, r] {
          Batch batch;
          const int32_t seq = batch.add_sequence(table);
          for (size_t t = 0; t < step.size(); ++t)
            batch.add(step[t], position + static_cast<int32_t>(t), seq, r == 0 && (i == 0 || t + 1 == step.size()));
          const std::span<const float> out = forwards[r]->run(batch, *caches[r]);
          outs[r].assign(out.begin(), out.end());
        });
      for (std::thread& thread : threads) thread.join();
      if (i == 0) prompt_logits = outs[0];
      const float* last = outs[0].data() + outs[0].size() - static_cast<size_t>(vocab);
      const auto next = static_cast<int32_t>(std::max_element(last, last + vocab) - last);
      tokens.push_back(next);
      position += static_cast<int32_t>(step.size());
      step = {next};
    }
    return tokens;
  };
  ThreadPool whole_pool(1);
  Forward whole_forward(whole, 16, whole_pool);
  KvCache whole_cache(whole->kv_shape(), n_blocks, block_size);
  std::vector<float> expected_logits;
  const std::vector<int32_t> expected = generate({&whole_forward}, {&whole_cache}, expected_logits);

  ThreadPartialSums sums(c.n_ranks);
  std::vector<std::unique_ptr<ThreadPartialSums::Rank>> rank_sums;
  std::vector<std::unique_ptr<ThreadPool>> pools;
  std::vector<std::unique_ptr<Forward>> forwards;
  std::vector<std::unique_ptr<KvCache>> caches;
  for (int64_t r = 0; r < c.n_ranks; ++r) {
    rank_sums.push_back(std::make_unique<ThreadPartialSums::Rank>(sums, r));
    pools.push_back(std::make_unique<ThreadPool>(1));
    forwards.push_back(std::make_unique<Forward>(ranks[static_cast<size_t>(r)], 16, *pools.back()));
    forwards.back()->set_partial_sums(rank_sums.back().get());
    caches.push_back(std::make_unique<KvCache>(ranks[static_cast<size_t>(r)]->kv_shape(), n_blocks, block_size));
  }
  std::vector<Forward*> forward_ptrs;
  std::vector<KvCache*> cache_ptrs;
  for (int64_t r = 0; r < c.n_ranks; ++r) {
    forward_ptrs.push_back(forwards[static_cast<size_t>(r)].get());
    cache_ptrs.push_back(caches[static_cast<size_t>(r)].get());
  }
  std::vector<float> got_logits;
  const std::vector<int32_t> got = generate(forward_ptrs, cache_ptrs, got_logits);

  ASSERT_EQ(got_logits.size(), expected_logits.size());
  for (size_t i = 0; i < got_logits.size(); ++i)
    ASSERT_NEAR(got_logits[i], expected_logits[i], 1e-4f * (1.0f + std::abs(expected_logits[i]))) << i;
  EXPECT_EQ(got, expected);
}

// `tandem info --tensor-parallel T` prints each rank's heads, columns and weight bytes (those its
// slice holds), and refuses a cut inside a quant block as serve does.
TEST(TensorSlice, InfoPrintsEachRanksShare) {
  TempDir dir;
  RandomModelSpec spec;  // 4 heads of 16, 2 KV heads, FFN 96: Q8_0 halves of the FFN are not whole blocks
  spec.d_model = 64, spec.n_heads = 4, spec.n_kv_heads = 2, spec.d_ff = 96, spec.seed = 305;
  const std::string f32 = dir.file("info_f32.gguf"), q8 = dir.file("info_q8_0.gguf");
  test_support::write_random_model(spec, f32);
  spec.dtype = DType::Q8_0;
  test_support::write_random_model(spec, q8);
  const testing::CommandResult result =
      testing::run_tandem("info -m " + testing::shell_quote(f32) + " --tensor-parallel 2");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (int64_t r = 0; r < 2; ++r) {
    const std::string line =
        fmt::format("rank {}:        query heads [{}, {}), KV heads [{}, {}), FFN columns [{}, {})", r, 2 * r,
                    2 * r + 2, r, r + 1, 48 * r, 48 * r + 48);
    const size_t at = result.out.find(line);
    ASSERT_NE(at, std::string::npos) << result.out;
    const std::string bytes =
        fmt::format("({} bytes)", load_model(f32, {.tensor_slice = TensorSlice{r, 2}})->weight_bytes_total());
    EXPECT_LT(result.out.find(bytes, at), result.out.find('\n', at)) << line << " lacks " << bytes;
  }
  const testing::CommandResult cut =
      testing::run_tandem("info -m " + testing::shell_quote(q8) + " --tensor-parallel 2");
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_NE(cut.err.find("(ffn_down) (Q8_0, [64, 96]) would be cut at column 48 of 96, inside a block of 32"),
            std::string::npos)
      << cut.err;
}

INSTANTIATE_TEST_SUITE_P(Models, TensorSliceForwardTest, ::testing::ValuesIn(slice_cases()),
                         [](const ::testing::TestParamInfo<SliceCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tandem
