// The RoPE layout proof: a model loaded from HF safetensors (Q/K rows permuted at load) gives
// the logits of a float64 reference written here that applies HF's half-split RoPE
// (rotate_half: element i with i + head_dim/2) directly to the unpermuted HF weights, with
// Qwen2 biases, Qwen3's per-head Q/K RMSNorm and own head_dim, and Llama 3 rope_scaling
// (frequencies from the published formula).
#include <gtest/gtest.h>

#include <numbers>

#include "hf/hf_model_writer.h"
#include "hf/hf_test_support.h"

namespace tandem {
namespace {

using namespace test_support;

std::vector<double> matvec(const RandomMatrix& m, const std::vector<double>& x) {
  std::vector<double> out(static_cast<size_t>(m.rows), 0.0);
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t c = 0; c < m.cols; ++c) out[r] += static_cast<double>(m.at(r, c)) * x[c];
  return out;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& w, double eps) {
  double sum = 0.0;
  for (double v : x) sum += v * v;
  const double scale = 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + eps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * scale * w[i];
  return out;
}

// Inverse frequencies as HF computes them, with Llama 3 scaling applied when requested.
std::vector<double> inverse_frequencies(const HfModelSpec& s) {
  const int64_t hd = s.head_dim();
  std::vector<double> freqs;
  for (int64_t i = 0; i < hd / 2; ++i) {
    double f =
        1.0 / std::pow(static_cast<double>(s.rope_theta), 2.0 * static_cast<double>(i) / static_cast<double>(hd));
    if (s.rope_scaling) {
      const Llama3Scaling& r = *s.rope_scaling;
      const double wavelength = 2.0 * std::numbers::pi / f;
      const double low_wl = r.original_context / r.low_freq_factor, high_wl = r.original_context / r.high_freq_factor;
      if (wavelength > low_wl) {
        f /= r.factor;
      } else if (wavelength >= high_wl) {
        const double smooth =
            (r.original_context / wavelength - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
        f = (1.0 - smooth) * f / r.factor + smooth * f;
      }
    }
    freqs.push_back(f);
  }
  return freqs;
}

// HF's apply_rotary_pos_emb on one head: x * cos + rotate_half(x) * sin, i.e. pairs
// (i, i + hd/2). With `interleaved`, pairs (2i, 2i+1) instead: the wrong layout for HF
// weights, used to show the test tells the two apart.
void rope_head(double* head, int64_t hd, int64_t position, const std::vector<double>& freqs, bool interleaved) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * freqs[i];
    const int64_t first = interleaved ? 2 * i : i, second = interleaved ? 2 * i + 1 : i + half;
    const double a = head[first], b = head[second];
    head[first] = a * std::cos(angle) - b * std::sin(angle);
    head[second] = b * std::cos(angle) + a * std::sin(angle);
  }
}

std::vector<double> reference_logits(const HfModelSpec& s, const HfWeights& w, const std::vector<int32_t>& tokens,
                                     bool interleaved = false) {
  const int64_t n = static_cast<int64_t>(tokens.size()), d = s.d_model, hd = s.head_dim();
  const int64_t group = s.n_heads / s.n_kv_heads;
  const std::vector<double> freqs = inverse_frequencies(s);
  std::vector<std::vector<double>> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) x[t].push_back(w.embed.at(tokens[t], i));
  auto add = [](std::vector<double>& v, const std::vector<float>& bias) {
    for (size_t i = 0; i < bias.size(); ++i) v[i] += bias[i];
  };
  for (const HfLayer& layer : w.layers) {
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<double> normed = rmsnorm(x[t], layer.attn_norm, s.rms_norm_eps);
      q[t] = matvec(layer.wq, normed), k[t] = matvec(layer.wk, normed), v[t] = matvec(layer.wv, normed);
      add(q[t], layer.bq), add(k[t], layer.bk), add(v[t], layer.bv);
      // Qwen3: each head RMSNormed with its own [head_dim] weights, before RoPE.
      auto norm_heads = [&](std::vector<double>& rows, int64_t n_heads, const std::vector<float>& weight) {
        if (weight.empty()) return;
        for (int64_t h = 0; h < n_heads; ++h) {
          const std::vector<double> head(rows.begin() + h * hd, rows.begin() + (h + 1) * hd);
          const std::vector<double> normed = rmsnorm(head, weight, s.rms_norm_eps);
          std::copy(normed.begin(), normed.end(), rows.begin() + h * hd);
        }
      };
      norm_heads(q[t], s.n_heads, layer.q_norm), norm_heads(k[t], s.n_kv_heads, layer.k_norm);
      for (int64_t h = 0; h < s.n_heads; ++h) rope_head(q[t].data() + h * hd, hd, t, freqs, interleaved);
      for (int64_t h = 0; h < s.n_kv_heads; ++h) rope_head(k[t].data() + h * hd, hd, t, freqs, interleaved);
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
          max_score = std::max(max_score, scores[p] = dot / std::sqrt(static_cast<double>(hd)));
        }
        for (double& score : scores) sum += (score = std::exp(score - max_score));
        for (int64_t p = 0; p <= t; ++p)
          for (int64_t i = 0; i < hd; ++i) attn[h * hd + i] += scores[p] / sum * v[p][kv + i];
      }
      const std::vector<double> projected = matvec(layer.wo, attn);
      for (int64_t i = 0; i < d; ++i) x[t][i] += projected[i];
      const std::vector<double> normed = rmsnorm(x[t], layer.ffn_norm, s.rms_norm_eps);
      std::vector<double> gate = matvec(layer.w_gate, normed);
      const std::vector<double> up = matvec(layer.w_up, normed);
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      const std::vector<double> down = matvec(layer.w_down, gate);
      for (int64_t i = 0; i < d; ++i) x[t][i] += down[i];
    }
  }
  std::vector<double> logits;
  for (int64_t t = 0; t < n; ++t) {
    const std::vector<double> row = matvec(w.lm_head, rmsnorm(x[t], w.norm, s.rms_norm_eps));
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

// Positions past the original context so Llama 3 scaling matters; 20 tokens.
const std::vector<int32_t> kTokens = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 32, 38, 46, 26, 43, 38, 32, 7, 9};

double max_error(const std::vector<float>& actual, const std::vector<double>& expected) {
  EXPECT_EQ(actual.size(), expected.size());
  double worst = 0.0;
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i)
    worst = std::max(worst, std::fabs(actual[i] - expected[i]));
  return worst;
}

struct ReferenceCase {
  std::string name;
  HfModelSpec spec;
};

class HfReferenceTest : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(HfReferenceTest, LoadedModelMatchesHalfSplitReference) {
  const HfModelSpec& spec = GetParam().spec;
  TempDir tmp;
  const std::string dir = make_dir(tmp.file("hf"));
  const HfWeights weights = random_hf_weights(spec);
  write_hf_model(spec, weights, dir);
  const std::vector<float> engine = prefill_logits(load_model(dir), kTokens);
  EXPECT_LE(max_error(engine, reference_logits(spec, weights, kTokens)), 2e-4);
  // The wrong pairing on the same weights is a different model: far outside the tolerance.
  EXPECT_GT(max_error(engine, reference_logits(spec, weights, kTokens, /*interleaved=*/true)), 1e-2);
}

HfModelSpec make_spec(const std::string& type, bool scaled, int64_t kv_heads) {
  HfModelSpec spec;
  spec.model_type = type;
  spec.n_kv_heads = kv_heads;
  spec.context_length = 64;
  if (scaled) spec.rope_scaling = Llama3Scaling{};
  return spec;
}

// 4 heads of 16 over hidden 48 (not 12), 2 KV heads, tied, as Qwen3 configs look.
HfModelSpec make_qwen3_spec() {
  HfModelSpec spec = make_spec("qwen3", false, 2);
  spec.head_size = 16;
  spec.tied = true;
  spec.rope_theta = 1000000.0f;
  spec.rms_norm_eps = 1e-6f;
  return spec;
}

INSTANTIATE_TEST_SUITE_P(Models, HfReferenceTest,
                         ::testing::Values(ReferenceCase{"llama_mha", make_spec("llama", false, 4)},
                                           ReferenceCase{"llama_gqa", make_spec("llama", false, 2)},
                                           ReferenceCase{"qwen2_biases", make_spec("qwen2", false, 1)},
                                           ReferenceCase{"qwen3_head_dim_qk_norm", make_qwen3_spec()},
                                           ReferenceCase{"llama3_scaled", make_spec("llama", true, 2)}),
                         [](const ::testing::TestParamInfo<ReferenceCase>& info) { return info.param.name; });

// Llama 3 scaling leaves the shortest wavelengths alone, slows the longest by `factor`, and
// visibly changes the logits of the same weights.
TEST(HfReference, RopeScalingChangesLogits) {
  TempDir tmp;
  HfModelSpec plain = make_spec("llama", false, 2), scaled = make_spec("llama", true, 2);
  const HfWeights weights = random_hf_weights(plain);
  const std::string plain_dir = make_dir(tmp.file("plain")), scaled_dir = make_dir(tmp.file("scaled"));
  write_hf_model(plain, weights, plain_dir);
  write_hf_model(scaled, weights, scaled_dir);
  const auto scaled_model = load_model(scaled_dir);
  ASSERT_EQ(scaled_model->config.rope_freq_factors.size(), static_cast<size_t>(plain.head_dim() / 2));
  EXPECT_EQ(scaled_model->config.rope_freq_factors.front(), 1.0f);  // highest frequency unchanged
  EXPECT_EQ(scaled_model->config.rope_freq_factors.back(), 8.0f);   // lowest slowed by `factor`
  const std::vector<float> a = prefill_logits(load_model(plain_dir), kTokens);
  const std::vector<float> b = prefill_logits(scaled_model, kTokens);
  double diff = 0.0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(a[i] - b[i])));
  EXPECT_GT(diff, 1e-2);
}

}  // namespace
}  // namespace tandem
