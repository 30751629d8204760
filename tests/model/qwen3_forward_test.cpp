// Qwen3 through the forward pass, against a float64 reference written here from the Qwen3
// definition rather than from the engine: per-head RMSNorm of Q and K (their own [head_dim]
// weights) after the projections, RoPE on half-split pairs (i, i + rope_dims/2, llama.cpp's
// NEOX) applied to the rows as the GGUF stores them, a head size that is not d_model / n_heads,
// tied and untied heads. Then prefill == prefill-in-chunks-then-decode and batch invariance,
// bit for bit, and the reference's wrong variants (adjacent pairs, no Q/K norm) as proof that
// the comparison can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "model/forward.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using test_support::RandomMatrix;
using test_support::RandomModelSpec;
using test_support::RandomWeights;
using test_support::TempDir;

// ---- The reference: one sequence at positions 0..n-1, in double. ----

struct Variant {
  bool adjacent_pairs = false;  // wrong for qwen3: pairs (2i, 2i+1)
  bool skip_qk_norm = false;    // wrong for qwen3: no per-head norm
};

std::vector<double> matvec(const RandomMatrix& m, const std::vector<double>& x) {
  std::vector<double> out(static_cast<size_t>(m.rows), 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < m.cols; ++c) sum += static_cast<double>(m.at(r, c)) * x[static_cast<size_t>(c)];
    out[static_cast<size_t>(r)] = sum;
  }
  return out;
}

// x[0..n) scaled to unit root-mean-square, times weight.
void rmsnorm_in_place(double* x, const std::vector<float>& weight, double eps) {
  const size_t n = weight.size();
  double sum_squares = 0.0;
  for (size_t i = 0; i < n; ++i) sum_squares += x[i] * x[i];
  const double scale = 1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * scale * weight[i];
}

// One head; pair i turns by position * base^(-2i / rope_dims). NEOX pairs element i with
// i + rope_dims/2; elements from rope_dims on are not rotated.
void rope_head(double* head, int64_t rope_dims, int64_t position, double base, bool adjacent) {
  const int64_t half = rope_dims / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * std::pow(base, -2.0 * static_cast<double>(i) / rope_dims);
    const int64_t first = adjacent ? 2 * i : i, second = adjacent ? 2 * i + 1 : i + half;
    const double a = head[first], b = head[second];
    head[first] = a * std::cos(angle) - b * std::sin(angle);
    head[second] = a * std::sin(angle) + b * std::cos(angle);
  }
}

// Logits [n_tokens, vocab_size].
std::vector<double> reference_logits(const RandomModelSpec& s, const RandomWeights& w,
                                     const std::vector<int32_t>& tokens, Variant variant = {}) {
  const int64_t n = static_cast<int64_t>(tokens.size()), d = s.d_model, hd = s.head_dim();
  const int64_t group = s.n_heads / s.n_kv_heads;
  std::vector<std::vector<double>> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) x[t].push_back(w.token_embedding.at(tokens[static_cast<size_t>(t)], i));
  for (const auto& layer : w.layers) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.attn_norm, s.rms_norm_eps);
      q[t] = matvec(layer.wq, normed), k[t] = matvec(layer.wk, normed), v[t] = matvec(layer.wv, normed);
      for (int64_t h = 0; h < s.n_heads; ++h) {
        if (!variant.skip_qk_norm) rmsnorm_in_place(q[t].data() + h * hd, layer.q_norm, s.rms_norm_eps);
        rope_head(q[t].data() + h * hd, s.rotary_dims(), t, s.rope_freq_base, variant.adjacent_pairs);
      }
      for (int64_t h = 0; h < s.n_kv_heads; ++h) {
        if (!variant.skip_qk_norm) rmsnorm_in_place(k[t].data() + h * hd, layer.k_norm, s.rms_norm_eps);
        rope_head(k[t].data() + h * hd, s.rotary_dims(), t, s.rope_freq_base, variant.adjacent_pairs);
      }
    }
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> attn(static_cast<size_t>(s.n_heads * hd), 0.0);
      for (int64_t h = 0; h < s.n_heads; ++h) {
        const int64_t kv = (h / group) * hd;
        std::vector<double> scores(static_cast<size_t>(t + 1));
        double max_score = -INFINITY, sum = 0.0;
        for (int64_t p = 0; p <= t; ++p) {
          double dot = 0.0;
          for (int64_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[p][kv + i];
          scores[p] = dot / std::sqrt(static_cast<double>(hd));
          max_score = std::max(max_score, scores[p]);
        }
        for (double& score : scores) sum += (score = std::exp(score - max_score));
        for (int64_t p = 0; p <= t; ++p)
          for (int64_t i = 0; i < hd; ++i) attn[h * hd + i] += scores[p] / sum * v[p][kv + i];
      }
      const std::vector<double> projected = matvec(layer.wo, attn);  // [d_model] from [n_heads * head_dim]
      for (int64_t i = 0; i < d; ++i) x[t][i] += projected[i];
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.ffn_norm, s.rms_norm_eps);
      std::vector<double> gate = matvec(layer.w_gate, normed);
      const std::vector<double> up = matvec(layer.w_up, normed);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const std::vector<double> down = matvec(layer.w_down, gate);
      for (int64_t i = 0; i < d; ++i) x[t][i] += down[i];
    }
  }
  std::vector<double> logits;
  for (int64_t t = 0; t < n; ++t) {
    rmsnorm_in_place(x[t].data(), w.output_norm, s.rms_norm_eps);
    const std::vector<double> row = matvec(w.output, x[t]);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

// Largest |engine - reference| over each logits row, relative to the row's largest |reference|.
double worst_relative_error(std::span<const float> engine, const std::vector<double>& reference, int64_t vocab) {
  EXPECT_EQ(engine.size(), reference.size());
  double worst = 0.0;
  for (size_t row = 0; row * vocab < std::min(engine.size(), reference.size()); ++row) {
    double max_abs = 0.0, max_err = 0.0;
    for (int64_t i = 0; i < vocab; ++i) {
      const size_t at = row * static_cast<size_t>(vocab) + static_cast<size_t>(i);
      max_abs = std::max(max_abs, std::fabs(reference[at]));
      max_err = std::max(max_err, std::fabs(engine[at] - reference[at]));
    }
    worst = std::max(worst, max_err / max_abs);
  }
  return worst;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& token : tokens) token = id(rng);
  return tokens;
}

struct Qwen3Case {
  std::string name;
  RandomModelSpec spec;
};

std::vector<Qwen3Case> cases() {
  RandomModelSpec gqa;  // 4 heads of 24 over d_model 48 (not 12), 2 KV heads, tied head
  gqa.architecture = "qwen3", gqa.head_size = 24, gqa.n_heads = 4, gqa.n_kv_heads = 2, gqa.tied_output = true;
  gqa.rope_freq_base = 1000000.0f, gqa.rms_norm_eps = 1e-6f, gqa.seed = 31;
  RandomModelSpec partial;  // 3 heads of 20 over d_model 48, MHA, RoPE on 12 of 20, untied, F16
  partial.architecture = "qwen3", partial.head_size = 20, partial.n_heads = 3, partial.n_kv_heads = 3;
  partial.rope_dims = 12, partial.n_layers = 3, partial.dtype = DType::F16, partial.seed = 32;
  return {{"gqa_tied", gqa}, {"mha_partial_rope_f16", partial}};
}

class Qwen3ForwardTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> load(const Qwen3Case& c, RandomWeights& weights) {
    const std::string path = dir_.file(c.name + ".gguf");
    weights = test_support::write_random_model(c.spec, path);
    return load_model(path);
  }
  TempDir dir_;
  ThreadPool pool_{2};
};

// Feeds `tokens` as one sequence in batches of `step` tokens (blocks of 4 positions, scrambled),
// every row asking for logits; returns [n_tokens, vocab_size].
std::vector<float> run_in_steps(Forward& forward, const std::vector<int32_t>& tokens, int64_t step) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  KvCache cache(forward.model().config.kv_shape(), 8, 4);
  const std::vector<int32_t> blocks = {5, 2, 7, 0, 3, 6, 1, 4};
  std::vector<float> logits;
  Batch batch;
  for (int64_t begin = 0; begin < n; begin += step) {
    batch.clear();
    const int32_t seq = batch.add_sequence(blocks);
    for (int64_t p = begin; p < std::min(n, begin + step); ++p)
      batch.add(tokens[static_cast<size_t>(p)], static_cast<int32_t>(p), seq, true);
    const std::span<const float> out = forward.run(batch, cache);
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

TEST_F(Qwen3ForwardTest, LoadsItsOwnHeadSizeAndQkNorms) {
  for (const Qwen3Case& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    const ModelConfig& config = model->config;
    EXPECT_EQ(config.architecture, "qwen3");
    EXPECT_EQ(config.head_dim, c.spec.head_size) << c.name;
    EXPECT_NE(config.head_dim, config.d_model / config.n_heads) << c.name;
    EXPECT_EQ(config.rope_dims, c.spec.rotary_dims()) << c.name;
    EXPECT_TRUE(config.qk_norm) << c.name;
    EXPECT_EQ(config.rope_pairing, RopePairing::HalfSplit) << c.name;
    EXPECT_EQ(config.kv_shape().head_dim, c.spec.head_size) << c.name;
    EXPECT_EQ(model->weights.layers[0].wq.dim(0), c.spec.n_heads * c.spec.head_size) << c.name;
    EXPECT_EQ(model->weights.layers[0].q_norm.n_elements(), c.spec.head_size) << c.name;
    EXPECT_EQ(model->weights.layers[1].k_norm.f32()[3], weights.layers[1].k_norm[3]) << c.name;
    EXPECT_EQ(model->weights.output.data == model->weights.token_embedding.data, c.spec.tied_output) << c.name;
  }
}

// One prefill of 20 tokens, every row's logits against the reference; the reference's wrong
// variants on the same weights are far outside the tolerance.
TEST_F(Qwen3ForwardTest, PrefillMatchesReference) {
  for (const Qwen3Case& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    Forward forward(model, 32, pool_);
    const std::vector<int32_t> tokens = random_tokens(20, c.spec.vocab_size, 41);
    const std::vector<float> engine = run_in_steps(forward, tokens, 20);
    EXPECT_LE(worst_relative_error(engine, reference_logits(c.spec, weights, tokens), c.spec.vocab_size), 1e-4)
        << c.name;
    EXPECT_GT(worst_relative_error(engine, reference_logits(c.spec, weights, tokens, {.adjacent_pairs = true}),
                                   c.spec.vocab_size),
              1e-2)
        << c.name << ": adjacent pairs should be a different model";
    EXPECT_GT(worst_relative_error(engine, reference_logits(c.spec, weights, tokens, {.skip_qk_norm = true}),
                                   c.spec.vocab_size),
              1e-2)
        << c.name << ": no Q/K norm should be a different model";
  }
}

// Prefill in one batch == chunks of 7 == a token per call (decode), bit for bit: every
// reduction's order is fixed by its own row, whatever the batch.
TEST_F(Qwen3ForwardTest, PrefillEqualsChunkedAndTokenByTokenDecode) {
  for (const Qwen3Case& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    Forward forward(model, 32, pool_);
    const std::vector<int32_t> tokens = random_tokens(23, c.spec.vocab_size, 42);
    const std::vector<float> whole = run_in_steps(forward, tokens, 23);
    const std::vector<float> chunked = run_in_steps(forward, tokens, 7);
    const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
    ASSERT_EQ(whole.size(), decoded.size());
    ASSERT_EQ(whole.size(), chunked.size());
    EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0) << c.name;
    EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0) << c.name;
    EXPECT_LE(worst_relative_error(decoded, reference_logits(c.spec, weights, tokens), c.spec.vocab_size), 1e-4)
        << c.name;
  }
}

// Sequence A alone (1 thread) equals, bit for bit, A sharing its batches (2 threads) with
// sequence B, which is part prefill, part decode alongside it.
TEST_F(Qwen3ForwardTest, BatchInvariance) {
  const Qwen3Case c = cases()[0];
  RandomWeights weights;
  const auto model = load(c, weights);
  const int64_t vocab = c.spec.vocab_size;
  const std::vector<int32_t> a = random_tokens(18, vocab, 51), b = random_tokens(14, vocab, 52);
  ThreadPool one(1);
  Forward alone_forward(model, 32, one);
  const std::vector<float> alone = run_in_steps(alone_forward, a, 18);

  Forward mixed_forward(model, 32, pool_);
  KvCache cache(model->config.kv_shape(), 12, 4);
  const std::vector<int32_t> blocks_b = {11, 3, 9, 0}, blocks_a = {1, 10, 2, 8, 5};
  std::vector<float> mixed(alone.size());
  Batch batch;
  batch.add_sequence(blocks_b);  // sequence id 0
  batch.add_sequence(blocks_a);  // sequence id 1
  for (int32_t p = 0; p < 10; ++p) batch.add(b[p], p, 0, true);
  for (int32_t p = 0; p < 6; ++p) batch.add(a[p], p, 1, true);
  std::span<const float> out = mixed_forward.run(batch, cache);
  std::copy_n(out.data() + 10 * vocab, 6 * vocab, mixed.data());
  int32_t next_b = 10;
  for (int32_t p = 6; p < 18; p += 3) {
    batch.clear();
    batch.add_sequence(blocks_b);
    batch.add_sequence(blocks_a);
    if (next_b < 14) batch.add(b[next_b], next_b, 0, true), ++next_b;
    for (int32_t i = p; i < p + 3; ++i) batch.add(a[i], i, 1, true);
    out = mixed_forward.run(batch, cache);
    const int64_t skip = batch.seq_ids[0] == 0 ? 1 : 0;
    std::copy_n(out.data() + skip * vocab, 3 * vocab, mixed.data() + p * vocab);
  }
  EXPECT_EQ(std::memcmp(alone.data(), mixed.data(), alone.size() * sizeof(float)), 0)
      << "sequence A's logits changed with its batch";
}

TEST_F(Qwen3ForwardTest, RejectsMissingNormsAndUnequalValueLength) {
  RandomModelSpec spec = cases()[0].spec;
  const std::string path = dir_.file("bad.gguf");
  test_support::write_random_model(spec, path);
  // The same file without one norm tensor, and with value_length != key_length.
  GgufFile file = GgufFile::open(path);
  auto rewrite = [&](const std::string& out, const std::string& skip_tensor, int64_t value_length) {
    GgufWriter writer;
    for (const auto& [key, value] : file.metadata()) writer.set(key, value);
    if (value_length > 0)
      writer.set("qwen3.attention.value_length", GgufValue::u32(static_cast<uint32_t>(value_length)));
    for (const GgufTensorInfo& info : file.tensors()) {
      if (info.name == skip_tensor) continue;
      const auto* bytes = static_cast<const uint8_t*>(info.view.data);
      std::vector<int64_t> shape(info.view.shape.begin(), info.view.shape.begin() + info.view.n_dims);
      writer.add_tensor(info.name, info.view.dtype, shape, std::vector<uint8_t>(bytes, bytes + info.view.n_bytes()));
    }
    writer.write(out);
  };
  auto load_error = [](const std::string& p) -> std::string {
    try {
      load_model(p);
    } catch (const InputError& error) {
      return error.what();
    }
    return "";
  };
  rewrite(dir_.file("no_norm.gguf"), "blk.1.attn_k_norm.weight", 0);
  EXPECT_NE(load_error(dir_.file("no_norm.gguf")).find("missing tensor 'blk.1.attn_k_norm.weight'"), std::string::npos);
  rewrite(dir_.file("value_length.gguf"), "", 16);
  EXPECT_NE(load_error(dir_.file("value_length.gguf")).find("value_length 16"), std::string::npos);
}

}  // namespace
}  // namespace tandem
