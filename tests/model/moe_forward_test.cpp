// Mixture-of-experts models (qwen3moe, and Mixtral as a llama with experts) through the forward
// pass, against a float64 reference written here from the two families' definitions: the router
// softmax over all experts, the top-k (ties to the lower index), the chosen weights renormalised,
// each chosen expert a SwiGLU FFN, their outputs summed by weight. Then prefill == chunks ==
// token-by-token decode and batch invariance, bit for bit; route_token's own cases (ties,
// renormalisation); and malformed files, each a one-line InputError naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/quant.h"
#include "model/forward.h"
#include "model/forward_steps.h"
#include "model/moe_router.h"
#include "profile/profiler.h"
#include "support/random_model.h"

namespace tandem {
namespace {

using test_reference::random_tokens;
using test_reference::run_in_steps;
using test_support::RandomMatrix;
using test_support::RandomModelSpec;
using test_support::RandomWeights;
using test_support::TempDir;

// ---- The reference: one sequence at positions 0..n-1, in double. ----

struct Variant {
  bool no_renormalise = false;  // wrong for both families: the top-k weights as softmax gave them
  bool q8_inputs = false;       // matmul inputs through the engine's 8-bit activation blocks
};

std::vector<double> matvec(const RandomMatrix& m, const std::vector<double>& x, bool q8_inputs = false) {
  std::vector<double> input = x;
  if (q8_inputs) {
    std::vector<float> narrow(x.begin(), x.end());
    std::vector<ActivationBlockQ8> blocks(static_cast<size_t>(m.cols / 32));
    quantize_activations_q8(narrow.data(), m.cols, blocks.data());
    for (int64_t c = 0; c < m.cols; ++c)
      input[static_cast<size_t>(c)] = static_cast<double>(blocks[c / 32].scale) * blocks[c / 32].quants[c % 32];
  }
  std::vector<double> out(static_cast<size_t>(m.rows), 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < m.cols; ++c) sum += static_cast<double>(m.at(r, c)) * input[static_cast<size_t>(c)];
    out[static_cast<size_t>(r)] = sum;
  }
  return out;
}

void rmsnorm_in_place(double* x, const std::vector<float>& weight, double eps) {
  const size_t n = weight.size();
  double sum_squares = 0.0;
  for (size_t i = 0; i < n; ++i) sum_squares += x[i] * x[i];
  const double scale = 1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * scale * weight[i];
}

// Pairs (2i, 2i+1) for llama (Mixtral), (i, i + rope_dims/2) for qwen3moe (NEOX).
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

// The MoE FFN of one normed row: softmax over every expert, the n_used largest (lower index on
// a tie), weights renormalised unless told not to, the weighted sum of the chosen SwiGLUs.
std::vector<double> reference_experts(const RandomModelSpec& s, const test_support::RandomLayer& layer,
                                      const std::vector<double>& x, Variant variant) {
  const std::vector<double> logits = matvec(layer.router, x);
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t e = 0; e < p.size(); ++e) sum += (p[e] = std::exp(logits[e] - max_logit));
  for (double& v : p) v /= sum;
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  double chosen = 0.0;
  for (int64_t k = 0; k < s.n_experts_used; ++k) chosen += p[order[static_cast<size_t>(k)]];
  std::vector<double> out(x.size(), 0.0);
  for (int64_t k = 0; k < s.n_experts_used; ++k) {
    const size_t e = order[static_cast<size_t>(k)];
    const double weight = variant.no_renormalise ? p[e] : p[e] / chosen;
    std::vector<double> gate = matvec(layer.expert_gate[e], x, variant.q8_inputs);
    const std::vector<double> up = matvec(layer.expert_up[e], x, variant.q8_inputs);
    for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
    const std::vector<double> down = matvec(layer.expert_down[e], gate, variant.q8_inputs);
    for (size_t i = 0; i < out.size(); ++i) out[i] += weight * down[i];
  }
  return out;
}

// Logits [n_tokens, vocab_size].
std::vector<double> reference_logits(const RandomModelSpec& s, const RandomWeights& w,
                                     const std::vector<int32_t>& tokens, Variant variant = {}) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t d = s.d_model, hd = s.head_dim(), group = s.n_heads / s.n_kv_heads;
  const bool adjacent = s.architecture == "llama", qk_norm = s.architecture == "qwen3moe";
  const bool q8 = variant.q8_inputs;
  std::vector<std::vector<double>> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) x[t].push_back(w.token_embedding.at(tokens[static_cast<size_t>(t)], i));
  for (const auto& layer : w.layers) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.attn_norm, s.rms_norm_eps);
      q[t] = matvec(layer.wq, normed, q8), k[t] = matvec(layer.wk, normed, q8), v[t] = matvec(layer.wv, normed, q8);
      for (int64_t h = 0; h < s.n_heads; ++h) {
        if (qk_norm) rmsnorm_in_place(q[t].data() + h * hd, layer.q_norm, s.rms_norm_eps);
        rope_head(q[t].data() + h * hd, s.rotary_dims(), t, s.rope_freq_base, adjacent);
      }
      for (int64_t h = 0; h < s.n_kv_heads; ++h) {
        if (qk_norm) rmsnorm_in_place(k[t].data() + h * hd, layer.k_norm, s.rms_norm_eps);
        rope_head(k[t].data() + h * hd, s.rotary_dims(), t, s.rope_freq_base, adjacent);
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
      const std::vector<double> projected = matvec(layer.wo, attn, q8);
      for (int64_t i = 0; i < d; ++i) x[t][i] += projected[i];
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.ffn_norm, s.rms_norm_eps);
      const std::vector<double> ffn = reference_experts(s, layer, normed, variant);
      for (int64_t i = 0; i < d; ++i) x[t][i] += ffn[i];
    }
  }
  std::vector<double> logits;
  for (int64_t t = 0; t < n; ++t) {
    rmsnorm_in_place(x[t].data(), w.output_norm, s.rms_norm_eps);
    const std::vector<double> row = matvec(w.output, x[t], q8);
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

struct MoeCase {
  std::string name;
  RandomModelSpec spec;
  double rel_tol = 1e-4;     // against the reference computing as the engine does
  double plain_rel_tol = 0;  // quantized: against the exact reference (no 8-bit activations)
};

// Odd sizes where the type allows: 5 experts of width 37 (qwen3moe, its own head size, 3 used),
// a Mixtral-style llama with 4 experts of d_ff 29, top 2; Q8_0 / Q4_0 need whole 32-blocks.
std::vector<MoeCase> cases() {
  RandomModelSpec qwen;
  qwen.architecture = "qwen3moe", qwen.head_size = 24, qwen.n_heads = 4, qwen.n_kv_heads = 2;
  qwen.n_experts = 5, qwen.n_experts_used = 3, qwen.d_ff_expert = 37, qwen.d_ff = 50;
  qwen.rope_freq_base = 1000000.0f, qwen.rms_norm_eps = 1e-6f, qwen.tied_output = true, qwen.seed = 61;
  RandomModelSpec mixtral;
  mixtral.n_experts = 4, mixtral.n_experts_used = 2, mixtral.d_ff = 29, mixtral.n_kv_heads = 1, mixtral.seed = 62;
  RandomModelSpec q8 = mixtral;
  q8.dtype = DType::Q8_0, q8.d_model = 64, q8.n_heads = 4, q8.n_kv_heads = 2, q8.d_ff = 96, q8.seed = 63;
  RandomModelSpec q4 = qwen;
  q4.dtype = DType::Q4_0, q4.d_model = 64, q4.head_size = 32, q4.d_ff_expert = 64, q4.seed = 64;
  // Q8_0/Q4_0 also quantize activations to 8 bits: held tightly against a reference that does the
  // same, loosely against the exact one (as reference_forward_test's dense cases: a few % of a
  // row's max, the activations' own rounding carried through two layers).
  return {{"qwen3moe_f32", qwen},
          {"mixtral_f32", mixtral},
          {"mixtral_q8_0", q8, 1e-4, 5e-2},
          {"qwen3moe_q4_0", q4, 1e-4, 5e-2}};
}

bool quantized(const MoeCase& c) { return c.plain_rel_tol > 0; }

class MoeForwardTest : public ::testing::Test {
 protected:
  std::shared_ptr<const Model> load(const MoeCase& c, RandomWeights& weights) {
    const std::string path = dir_.file(c.name + ".gguf");
    weights = test_support::write_random_model(c.spec, path);
    return load_model(path);
  }
  TempDir dir_;
  ThreadPool pool_{2};
};

TEST_F(MoeForwardTest, LoadsExpertsAsPerExpertViews) {
  for (const MoeCase& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    const ModelConfig& config = model->config;
    EXPECT_EQ(config.n_experts, c.spec.n_experts) << c.name;
    EXPECT_EQ(config.n_experts_used, c.spec.n_experts_used) << c.name;
    EXPECT_EQ(config.d_ff_expert, c.spec.expert_width()) << c.name;
    EXPECT_TRUE(config.expert_weights_norm) << c.name;
    EXPECT_EQ(config.qk_norm, c.spec.architecture == "qwen3moe") << c.name;
    const LayerWeights& layer = model->weights.layers[1];
    ASSERT_EQ(static_cast<int64_t>(layer.expert_down.size()), c.spec.n_experts) << c.name;
    EXPECT_EQ(layer.router.dim(0), c.spec.n_experts) << c.name;
    EXPECT_EQ(layer.expert_gate[2].dim(0), c.spec.expert_width()) << c.name;
    EXPECT_EQ(layer.expert_down[2].dim(0), c.spec.d_model) << c.name;
    EXPECT_EQ(layer.expert_down[2].dim(1), c.spec.expert_width()) << c.name;
    EXPECT_EQ(layer.w_gate.data, nullptr) << c.name;
    // The last expert's last row is the file's: slices are where the stacked tensor puts them.
    std::vector<float> row(static_cast<size_t>(c.spec.expert_width()));
    const TensorView& down = layer.expert_down.back();
    if (down.packed == nullptr) {
      dequantize_row(down.dtype, down.row(c.spec.d_model - 1), row.data(), c.spec.expert_width());
      EXPECT_EQ(row.back(), weights.layers[1].expert_down.back().at(c.spec.d_model - 1, c.spec.expert_width() - 1))
          << c.name;
    }
    // Decode reads the router and n_used experts per layer, not all of them.
    const int64_t expert_bytes =
        layer.expert_gate[0].n_bytes() + layer.expert_up[0].n_bytes() + layer.expert_down[0].n_bytes();
    EXPECT_EQ(
        model->weight_bytes_total() - model->weight_bytes_per_token(),
        model->weights.token_embedding.n_bytes() - model->weights.token_embedding.row_bytes() -
            (model->weights.output.data == model->weights.token_embedding.data ? model->weights.output.n_bytes() : 0) +
            c.spec.n_layers * (c.spec.n_experts - c.spec.n_experts_used) * expert_bytes)
        << c.name;
  }
}

// One prefill of 21 tokens, every row's logits against the reference; without renormalising
// the chosen weights the reference is a different model, far outside the tolerance.
TEST_F(MoeForwardTest, PrefillMatchesReference) {
  for (const MoeCase& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    Forward forward(model, 32, pool_);
    const std::vector<int32_t> tokens = random_tokens(21, c.spec.vocab_size, 71);
    const std::vector<float> engine = run_in_steps(forward, tokens, 21);
    const int64_t vocab = c.spec.vocab_size;
    EXPECT_LE(
        worst_relative_error(engine, reference_logits(c.spec, weights, tokens, {.q8_inputs = quantized(c)}), vocab),
        c.rel_tol)
        << c.name;
    if (quantized(c)) {
      EXPECT_LE(worst_relative_error(engine, reference_logits(c.spec, weights, tokens), vocab), c.plain_rel_tol)
          << c.name;
    }
    EXPECT_GT(
        worst_relative_error(
            engine, reference_logits(c.spec, weights, tokens, {.no_renormalise = true, .q8_inputs = quantized(c)}),
            vocab),
        1e-2)
        << c.name << ": unnormalised top-k weights should be a different model";
  }
}

// Prefill in one batch == chunks of 5 == a token per call (decode), bit for bit.
TEST_F(MoeForwardTest, PrefillEqualsChunkedAndTokenByTokenDecode) {
  for (const MoeCase& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    Forward forward(model, 32, pool_);
    const std::vector<int32_t> tokens = random_tokens(23, c.spec.vocab_size, 72);
    const std::vector<float> whole = run_in_steps(forward, tokens, 23);
    const std::vector<float> chunked = run_in_steps(forward, tokens, 5);
    const std::vector<float> decoded = run_in_steps(forward, tokens, 1);
    ASSERT_EQ(whole.size(), decoded.size());
    ASSERT_EQ(whole.size(), chunked.size());
    EXPECT_EQ(std::memcmp(whole.data(), chunked.data(), whole.size() * sizeof(float)), 0) << c.name;
    EXPECT_EQ(std::memcmp(whole.data(), decoded.data(), whole.size() * sizeof(float)), 0) << c.name;
  }
}

// Sequence A alone (1 thread) equals, bit for bit, A sharing its batches (2 threads) with
// sequence B — whose tokens pick some of the same experts — part prefill, part decode; and
// A's prompt repeated as B (every expert shared with A's own rows) changes nothing either.
TEST_F(MoeForwardTest, BatchInvariance) {
  for (const MoeCase& c : cases()) {
    RandomWeights weights;
    const auto model = load(c, weights);
    const int64_t vocab = c.spec.vocab_size;
    const std::vector<int32_t> a = random_tokens(18, vocab, 81);
    ThreadPool one(1);
    Forward alone_forward(model, 64, one);
    const std::vector<float> alone = run_in_steps(alone_forward, a, 18);
    for (const std::vector<int32_t>& b :
         {random_tokens(14, vocab, 82), std::vector<int32_t>(a.begin(), a.begin() + 14)}) {
      Forward mixed_forward(model, 64, pool_);
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
          << c.name << ": sequence A's logits changed with its batch";
    }
  }
}

// Decode reads only the chosen experts: per decode step and layer, n_used gate/up/down matmuls
// of one expert's bytes each (the profiler's count and bytes from shapes); a prefill runs each
// expert some token chose once (at most n_experts).
TEST_F(MoeForwardTest, DecodeReadsOnlyTheChosenExperts) {
  const MoeCase c = cases()[2];  // Mixtral-style Q8_0: 4 experts, 2 used
  RandomWeights weights;
  const auto model = load(c, weights);
  Forward forward(model, 32, pool_);
  Profiler profiler;
  forward.set_profiler(&profiler);
  const std::vector<int32_t> tokens = random_tokens(26, c.spec.vocab_size, 73);
  KvCache cache(model->config.kv_shape(), 8, 4);
  const std::vector<int32_t> blocks = {5, 2, 7, 0, 3, 6, 1, 4};
  Batch batch;
  batch.add_sequence(blocks);
  for (int32_t p = 0; p < 20; ++p) batch.add(tokens[p], p, 0, p == 19);
  forward.run(batch, cache);
  for (int32_t p = 20; p < 26; ++p) {
    batch.clear();
    batch.add_sequence(blocks);
    batch.add(tokens[p], p, 0, true);
    forward.run(batch, cache);
  }
  const Profiler::Snapshot snapshot = profiler.snapshot();
  auto site = [&](Phase phase, OpRole role, int32_t layer) -> const SiteStats& {
    return snapshot.sites[static_cast<size_t>(phase)][static_cast<size_t>(Profiler::site_index(role, layer))];
  };
  const int64_t used = c.spec.n_experts_used, steps = 6;
  for (int32_t layer = 0; layer < c.spec.n_layers; ++layer) {
    const LayerWeights& w = model->weights.layers[static_cast<size_t>(layer)];
    for (OpRole role : {OpRole::Gate, OpRole::Up, OpRole::Down}) {
      EXPECT_EQ(site(Phase::Decode, role, layer).calls, steps * used) << op_role_name(role) << " layer " << layer;
      EXPECT_GE(site(Phase::Prefill, role, layer).calls, 1);
      EXPECT_LE(site(Phase::Prefill, role, layer).calls, c.spec.n_experts);
    }
    // Weight bytes of one expert per call (the token's activations add the rest).
    EXPECT_GE(site(Phase::Decode, OpRole::Gate, layer).bytes, steps * used * w.expert_gate[0].n_bytes());
    EXPECT_LT(site(Phase::Decode, OpRole::Gate, layer).bytes, steps * (used + 1) * w.expert_gate[0].n_bytes());
    EXPECT_GT(site(Phase::Decode, OpRole::Router, layer).calls, 0);
  }
}

// ---- route_token ----

TEST(MoeRouter, PicksTheLargestInOrderAndRenormalises) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 0.0f};
  std::vector<float> probabilities(logits.size());
  int32_t experts[2];
  float weights[2];
  route_token(logits.data(), 5, 2, true, probabilities.data(), experts, weights);
  EXPECT_EQ(experts[0], 1);
  EXPECT_EQ(experts[1], 3);
  // Renormalised: the softmax over the two chosen logits alone.
  EXPECT_NEAR(weights[0], 1.0 / (1.0 + std::exp(-0.5)), 1e-6);
  EXPECT_NEAR(weights[1], 1.0 / (1.0 + std::exp(0.5)), 1e-6);
  route_token(logits.data(), 5, 2, false, probabilities.data(), experts, weights);
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - 2.0);
  EXPECT_NEAR(weights[0], 1.0 / sum, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(-0.5) / sum, 1e-6);
  double total = 0.0;
  for (float p : probabilities) total += p;
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TEST(MoeRouter, TiesGoToTheLowerExpertIndex) {
  const std::vector<float> logits = {1.0f, 3.0f, 1.0f, 3.0f, 3.0f, 1.0f};
  std::vector<float> probabilities(logits.size());
  int32_t experts[6];
  float weights[6];
  route_token(logits.data(), 6, 4, true, probabilities.data(), experts, weights);
  EXPECT_EQ(std::vector<int32_t>(experts, experts + 4), (std::vector<int32_t>{1, 3, 4, 0}));
  EXPECT_EQ(weights[0], weights[1]);
  EXPECT_EQ(weights[1], weights[2]);
  EXPECT_LT(weights[3], weights[2]);
  // All equal: the first n_used in index order, each 1 / n_used.
  const std::vector<float> flat(8, -2.5f);
  probabilities.resize(8);
  route_token(flat.data(), 8, 3, true, probabilities.data(), experts, weights);
  EXPECT_EQ(std::vector<int32_t>(experts, experts + 3), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(weights[2], 1.0f / 3.0f, 1e-7);
  // Every expert used: all chosen, by probability.
  route_token(logits.data(), 6, 6, false, probabilities.data(), experts, weights);
  EXPECT_EQ(std::vector<int32_t>(experts, experts + 6), (std::vector<int32_t>{1, 3, 4, 0, 2, 5}));
}

// Large logits do not overflow (the max is subtracted first).
TEST(MoeRouter, LargeLogitsStayFinite) {
  const std::vector<float> logits = {1000.0f, 999.0f, -1000.0f};
  std::vector<float> probabilities(3);
  int32_t experts[2];
  float weights[2];
  route_token(logits.data(), 3, 2, true, probabilities.data(), experts, weights);
  EXPECT_EQ(experts[0], 0);
  EXPECT_EQ(experts[1], 1);
  EXPECT_TRUE(std::isfinite(weights[0]) && std::isfinite(weights[1]));
  EXPECT_NEAR(weights[0] + weights[1], 1.0f, 1e-6);
}

// ---- Malformed files ----

std::string load_error(const std::string& path) {
  try {
    load_model(path);
  } catch (const InputError& error) {
    return error.what();
  }
  return "";
}

// The file at `path` again, with `set` applied to its metadata, `skip` left out and `reshape`
// giving a tensor another (valid-size) shape.
void rewrite(const std::string& path, const std::string& out, const std::function<void(GgufWriter&)>& set,
             const std::string& skip = "", const std::string& reshape = "") {
  GgufFile file = GgufFile::open(path);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  set(writer);
  for (const GgufTensorInfo& info : file.tensors()) {
    if (info.name == skip) continue;
    const auto* bytes = static_cast<const uint8_t*>(info.view.data);
    std::vector<int64_t> shape(info.view.shape.begin(), info.view.shape.begin() + info.view.n_dims);
    if (info.name == reshape) shape = {shape[0] * shape[1], shape[2]};  // experts flattened to 2-D
    writer.add_tensor(info.name, info.view.dtype, shape, std::vector<uint8_t>(bytes, bytes + info.view.n_bytes()));
  }
  writer.write(out);
}

TEST_F(MoeForwardTest, MalformedFilesAreOneLineErrors) {
  const MoeCase c = cases()[0];
  const std::string path = dir_.file("good.gguf");
  test_support::write_random_model(c.spec, path);
  auto no_change = [](GgufWriter&) {};
  struct Bad {
    std::string name, expected;
    std::function<void(GgufWriter&)> set;
    std::string skip, reshape;
  };
  const std::vector<Bad> bad = {
      {"used_over_count.gguf", "experts used per token 9 is outside 1..5",
       [](GgufWriter& w) { w.set("qwen3moe.expert_used_count", GgufValue::u32(9)); }, "", ""},
      {"no_used.gguf", "expert_used_count", [](GgufWriter&) {}, "", ""},
      {"no_router.gguf", "missing tensor 'blk.1.ffn_gate_inp.weight'", no_change, "blk.1.ffn_gate_inp.weight", ""},
      {"no_down.gguf", "missing tensor 'blk.0.ffn_down_exps.weight'", no_change, "blk.0.ffn_down_exps.weight", ""},
      {"flat_up.gguf", "tensor 'blk.0.ffn_up_exps.weight' has shape [185, 48], expected [5, 37, 48]", no_change, "",
       "blk.0.ffn_up_exps.weight"},
      {"width.gguf", "tensor 'blk.0.ffn_gate_exps.weight' has shape [5, 37, 48], expected [5, 36, 48]",
       [](GgufWriter& w) { w.set("qwen3moe.expert_feed_forward_length", GgufValue::u32(36)); }, "", ""},
      {"no_count.gguf", "missing metadata key 'qwen3moe.expert_count'", [](GgufWriter&) {}, "", ""},
  };
  for (const Bad& b : bad) {
    const std::string out = dir_.file(b.name);
    if (b.name == "no_used.gguf" || b.name == "no_count.gguf") {
      // Metadata without one key: rebuild without it.
      GgufFile file = GgufFile::open(path);
      GgufWriter writer;
      const std::string drop = b.name == "no_used.gguf" ? "qwen3moe.expert_used_count" : "qwen3moe.expert_count";
      for (const auto& [key, value] : file.metadata())
        if (key != drop) writer.set(key, value);
      for (const GgufTensorInfo& info : file.tensors()) {
        const auto* bytes = static_cast<const uint8_t*>(info.view.data);
        std::vector<int64_t> shape(info.view.shape.begin(), info.view.shape.begin() + info.view.n_dims);
        writer.add_tensor(info.name, info.view.dtype, shape, std::vector<uint8_t>(bytes, bytes + info.view.n_bytes()));
      }
      writer.write(out);
    } else {
      rewrite(path, out, b.set, b.skip, b.reshape);
    }
    const std::string error = load_error(out);
    EXPECT_NE(error.find(b.expected), std::string::npos) << b.name << ": " << error;
    EXPECT_NE(error.find(out), std::string::npos) << b.name << ": the error names the file: " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << b.name << ": one line: " << error;
  }
}

}  // namespace
}  // namespace tandem
