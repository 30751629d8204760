// A float64 reference of the decoder written from the definitions, not from the engine, for
// the sliding-window (Mistral-style llama) and gemma3 tests: one sequence at positions
// 0..n-1; in a local layer position p attends to (p - window, p]. Gemma 3: embeddings times
// sqrt(d_model); per-head RMSNorm of Q and K; RoPE on half-split pairs at the local base in
// local layers and the global base in global ones; RMSNorm of the attention output and of the
// FFN output before each joins the residual; gelu(tanh) gating; soft-capped logits. Gemma 2:
// the same blocks without Q/K norms, even layers local, one RoPE base, attention scores
// soft-capped (cap·tanh(score / cap)) before the softmax. Each `Variant` flag computes a wrong
// model, to show the comparison can fail.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "support/random_model.h"

namespace tandem::test_reference {

using test_support::RandomMatrix;
using test_support::RandomModelSpec;
using test_support::RandomWeights;

struct Variant {
  bool no_window = false;               // attend to the whole history in every layer
  bool global_rope_everywhere = false;  // gemma3: local layers at the global base
  bool silu_ffn = false;                // gemma3: SwiGLU instead of GeGLU
  bool no_post_norms = false;           // gemma3: skip the post-attention / post-FFN norms
  bool no_embedding_scale = false;      // gemma3: embeddings not times sqrt(d_model)
  bool no_softcap = false;              // gemma3: logits not soft-capped
  bool no_attn_softcap = false;         // gemma2: attention scores not soft-capped
  bool odd_layers_local = false;        // gemma2: the local/global alternation the other way round
};

inline std::vector<double> matvec(const RandomMatrix& m, const std::vector<double>& x) {
  std::vector<double> out(static_cast<size_t>(m.rows), 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < m.cols; ++c) sum += static_cast<double>(m.at(r, c)) * x[static_cast<size_t>(c)];
    out[static_cast<size_t>(r)] = sum;
  }
  return out;
}

inline void rmsnorm_in_place(double* x, const std::vector<float>& weight, double eps) {
  const size_t n = weight.size();
  double sum_squares = 0.0;
  for (size_t i = 0; i < n; ++i) sum_squares += x[i] * x[i];
  const double scale = 1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[i] = x[i] * scale * weight[i];
}

// Pair i turns by position * base^(-2i / rope_dims); adjacent pairs (2i, 2i+1) or half-split (i, i + half).
inline void rope_head(double* head, int64_t rope_dims, int64_t position, double base, bool adjacent) {
  const int64_t half = rope_dims / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * std::pow(base, -2.0 * static_cast<double>(i) / rope_dims);
    const int64_t first = adjacent ? 2 * i : i, second = adjacent ? 2 * i + 1 : i + half;
    const double a = head[first], b = head[second];
    head[first] = a * std::cos(angle) - b * std::sin(angle);
    head[second] = a * std::sin(angle) + b * std::cos(angle);
  }
}

inline double gelu_tanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

// Is layer l local? Mirrors the file's meaning (every pattern-th layer global; all for llama).
inline bool layer_is_local(const RandomModelSpec& s, int64_t l) {
  if (s.sliding_window == 0) return false;
  if (s.architecture == "gemma2") return l % 2 == 0;
  if (s.architecture != "gemma3" || s.window_pattern == 0) return true;
  return (l + 1) % s.window_pattern != 0;
}

// Logits [n_tokens, vocab_size].
inline std::vector<double> reference_logits(const RandomModelSpec& s, const RandomWeights& w,
                                            const std::vector<int32_t>& tokens, Variant variant = {}) {
  const bool gemma = s.architecture == "gemma2" || s.architecture == "gemma3";
  const bool local_base = s.architecture == "gemma3";  // gemma2 turns at one base everywhere
  const bool adjacent = s.architecture == "llama";
  const int64_t n = static_cast<int64_t>(tokens.size()), d = s.d_model, hd = s.head_dim();
  const int64_t group = s.n_heads / s.n_kv_heads;
  std::vector<std::vector<double>> x(static_cast<size_t>(n));
  const double embedding_scale = gemma && !variant.no_embedding_scale ? std::sqrt(static_cast<double>(d)) : 1.0;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i)
      x[t].push_back(w.token_embedding.at(tokens[static_cast<size_t>(t)], i) * embedding_scale);
  for (int64_t l = 0; l < static_cast<int64_t>(w.layers.size()); ++l) {
    const auto& layer = w.layers[static_cast<size_t>(l)];
    const bool local = layer_is_local(s, l) != (variant.odd_layers_local && s.sliding_window > 0);
    const int64_t window = local && !variant.no_window ? s.sliding_window : 0;
    const double base =
        local_base && local && !variant.global_rope_everywhere ? s.rope_freq_base_local : s.rope_freq_base;
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.attn_norm, s.rms_norm_eps);
      q[t] = matvec(layer.wq, normed), k[t] = matvec(layer.wk, normed), v[t] = matvec(layer.wv, normed);
      for (int64_t h = 0; h < s.n_heads; ++h) {
        if (!layer.q_norm.empty()) rmsnorm_in_place(q[t].data() + h * hd, layer.q_norm, s.rms_norm_eps);
        rope_head(q[t].data() + h * hd, s.rotary_dims(), t, base, adjacent);
      }
      for (int64_t h = 0; h < s.n_kv_heads; ++h) {
        if (!layer.k_norm.empty()) rmsnorm_in_place(k[t].data() + h * hd, layer.k_norm, s.rms_norm_eps);
        rope_head(k[t].data() + h * hd, s.rotary_dims(), t, base, adjacent);
      }
    }
    for (int64_t t = 0; t < n; ++t) {
      const int64_t first = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
      std::vector<double> attn(static_cast<size_t>(s.n_heads * hd), 0.0);
      for (int64_t h = 0; h < s.n_heads; ++h) {
        const int64_t kv = (h / group) * hd;
        std::vector<double> scores;
        double max_score = -INFINITY, sum = 0.0;
        for (int64_t p = first; p <= t; ++p) {
          double dot = 0.0;
          for (int64_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[p][kv + i];
          double score = dot / std::sqrt(static_cast<double>(hd));
          if (s.attn_logit_softcap > 0.0f && !variant.no_attn_softcap)
            score = s.attn_logit_softcap * std::tanh(score / s.attn_logit_softcap);
          scores.push_back(score);
          max_score = std::max(max_score, scores.back());
        }
        for (double& score : scores) sum += (score = std::exp(score - max_score));
        for (int64_t p = first; p <= t; ++p)
          for (int64_t i = 0; i < hd; ++i) attn[h * hd + i] += scores[p - first] / sum * v[p][kv + i];
      }
      std::vector<double> projected = matvec(layer.wo, attn);
      if (gemma && !variant.no_post_norms) rmsnorm_in_place(projected.data(), layer.post_attn_norm, s.rms_norm_eps);
      for (int64_t i = 0; i < d; ++i) x[t][i] += projected[i];
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.ffn_norm, s.rms_norm_eps);
      std::vector<double> gate = matvec(layer.w_gate, normed);
      const std::vector<double> up = matvec(layer.w_up, normed);
      for (size_t i = 0; i < gate.size(); ++i)
        gate[i] = (gemma && !variant.silu_ffn ? gelu_tanh(gate[i]) : gate[i] / (1.0 + std::exp(-gate[i]))) * up[i];
      std::vector<double> down = matvec(layer.w_down, gate);
      if (gemma && !variant.no_post_norms) rmsnorm_in_place(down.data(), layer.post_ffn_norm, s.rms_norm_eps);
      for (int64_t i = 0; i < d; ++i) x[t][i] += down[i];
    }
  }
  std::vector<double> logits;
  for (int64_t t = 0; t < n; ++t) {
    rmsnorm_in_place(x[t].data(), w.output_norm, s.rms_norm_eps);
    std::vector<double> row = matvec(w.output, x[t]);
    if (s.final_logit_softcap > 0.0f && !variant.no_softcap)
      for (double& logit : row) logit = s.final_logit_softcap * std::tanh(logit / s.final_logit_softcap);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  return logits;
}

// Largest |engine - reference| over each logits row, relative to the row's largest |reference|.
inline double worst_relative_error(std::span<const float> engine, const std::vector<double>& reference, int64_t vocab) {
  double worst = 0.0;
  if (engine.size() != reference.size()) return INFINITY;
  for (size_t row = 0; row * vocab < engine.size(); ++row) {
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

}  // namespace tandem::test_reference
