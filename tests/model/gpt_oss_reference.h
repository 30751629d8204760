// A float64 reference of the gpt-oss decoder written from its definitions (llama.cpp's
// openai-moe graph and HF's GptOssForCausalLM), not from the engine: one sequence at positions
// 0..n-1. Per layer: RMSNorm; Q/K/V with biases; RoPE on half-split pairs with YaRN's
// frequencies and magnitude (tests/support/rope_reference.h); scores q·k / sqrt(head_dim) over
// (p - window, p] in the even (local) layers and [0, p] in the odd ones, softmax whose
// denominator also holds exp(sink) of the head; output projection with bias; residual; RMSNorm;
// router logits + bias, the top-k logits, softmax over those k; each chosen expert
// down(swiglu_oai(gate(x) + bg, up(x) + bu)) + bd, weighted; residual. Each `Variant` flag
// computes a wrong model, to show the comparison can fail.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "support/random_model.h"
#include "support/rope_reference.h"

namespace tandem::gpt_oss_reference {

using test_support::RandomModelSpec;
using test_support::RandomWeights;

struct Variant {
  bool no_sinks = false;          // sinks left out of the softmax
  bool odd_layers_local = false;  // the local/global alternation the other way round
  bool no_window = false;         // every layer global
  bool softmax_all = false;       // router softmax over all experts, top-k of that (qwen3moe's gating)
  bool plain_swiglu = false;      // silu(gate) * up instead of the clamped, shifted form
  bool no_biases = false;         // every bias left out
  bool no_yarn = false;           // plain RoPE frequencies and magnitude
};

// gpt-oss's activation: g = min(gate, 7), u = clamp(up, -7, 7), g·sigmoid(1.702 g)·(u + 1).
inline double swiglu_oai(double gate, double up) {
  const double g = std::min(gate, 7.0), u = std::clamp(up, -7.0, 7.0);
  return g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
}

inline void add(std::vector<double>& x, const std::vector<float>& bias, bool skip) {
  if (skip) return;
  for (size_t i = 0; i < x.size(); ++i) x[i] += bias[i];
}

// Logits [n_tokens, vocab_size].
inline std::vector<double> reference_logits(const RandomModelSpec& s, const RandomWeights& w,
                                            const std::vector<int32_t>& tokens, Variant variant = {}) {
  using rope_test::matvec;
  using rope_test::rmsnorm_in_place;
  const int64_t n = static_cast<int64_t>(tokens.size()), d = s.d_model, hd = s.head_dim();
  const int64_t group = s.n_heads / s.n_kv_heads;
  rope_test::Scaling scaling;
  if (s.yarn_factor > 0.0 && !variant.no_yarn) {
    scaling.type = "yarn";
    scaling.factor = s.yarn_factor;
    scaling.original = s.yarn_original;
  }
  const std::vector<double> freq = rope_test::frequencies(scaling, s.rotary_dims(), s.rope_freq_base, s.context_length);
  const double mag = rope_test::magnitude(scaling);
  std::vector<std::vector<double>> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) x[t].push_back(w.token_embedding.at(tokens[static_cast<size_t>(t)], i));
  for (int64_t l = 0; l < static_cast<int64_t>(w.layers.size()); ++l) {
    const auto& layer = w.layers[static_cast<size_t>(l)];
    const bool local = (l % 2 == 0) != variant.odd_layers_local;
    const int64_t window = local && !variant.no_window ? s.sliding_window : 0;
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.attn_norm, s.rms_norm_eps);
      q[t] = matvec(layer.wq, normed), k[t] = matvec(layer.wk, normed), v[t] = matvec(layer.wv, normed);
      add(q[t], layer.bq, variant.no_biases), add(k[t], layer.bk, variant.no_biases);
      add(v[t], layer.bv, variant.no_biases);
      for (int64_t h = 0; h < s.n_heads; ++h) rope_test::rope_head(q[t].data() + h * hd, freq, mag, t, true);
      for (int64_t h = 0; h < s.n_kv_heads; ++h) rope_test::rope_head(k[t].data() + h * hd, freq, mag, t, true);
    }
    for (int64_t t = 0; t < n; ++t) {
      const int64_t first = window > 0 ? std::max<int64_t>(0, t - window + 1) : 0;
      std::vector<double> attn(static_cast<size_t>(s.n_heads * hd), 0.0);
      for (int64_t h = 0; h < s.n_heads; ++h) {
        const int64_t kv = (h / group) * hd;
        const bool sink = !variant.no_sinks;
        const double sink_logit = layer.sinks[static_cast<size_t>(h)];
        std::vector<double> scores;
        double max_score = sink ? sink_logit : -INFINITY;
        for (int64_t p = first; p <= t; ++p) {
          double dot = 0.0;
          for (int64_t i = 0; i < hd; ++i) dot += q[t][h * hd + i] * k[p][kv + i];
          scores.push_back(dot / std::sqrt(static_cast<double>(hd)));
          max_score = std::max(max_score, scores.back());
        }
        double sum = sink ? std::exp(sink_logit - max_score) : 0.0;
        for (double& score : scores) sum += (score = std::exp(score - max_score));
        for (int64_t p = first; p <= t; ++p)
          for (int64_t i = 0; i < hd; ++i) attn[h * hd + i] += scores[p - first] / sum * v[p][kv + i];
      }
      std::vector<double> projected = matvec(layer.wo, attn);
      add(projected, layer.bo, variant.no_biases);
      for (int64_t i = 0; i < d; ++i) x[t][i] += projected[i];

      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.ffn_norm, s.rms_norm_eps);
      std::vector<double> logits = matvec(layer.router, normed);
      add(logits, layer.router_bias, variant.no_biases);
      std::vector<int64_t> order(static_cast<size_t>(s.n_experts));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
      std::vector<double> weights;
      double total = 0.0;
      for (int64_t r = 0; r < s.n_experts_used; ++r)
        total += weights.emplace_back(std::exp(logits[order[r]] - logits[order[0]]));
      // The wrong gating: the chosen experts' probabilities under a softmax over all of them,
      // not renormalised (qwen3moe without norm_topk_prob).
      if (variant.softmax_all)
        for (int64_t e = s.n_experts_used; e < s.n_experts; ++e) total += std::exp(logits[order[e]] - logits[order[0]]);
      std::vector<double> out(static_cast<size_t>(d), 0.0);
      for (int64_t r = 0; r < s.n_experts_used; ++r) {
        const auto e = static_cast<size_t>(order[r]);
        std::vector<double> gate = matvec(layer.expert_gate[e], normed);
        std::vector<double> up = matvec(layer.expert_up[e], normed);
        add(gate, layer.expert_gate_bias[e], variant.no_biases), add(up, layer.expert_up_bias[e], variant.no_biases);
        for (size_t i = 0; i < gate.size(); ++i)
          gate[i] = variant.plain_swiglu ? gate[i] / (1.0 + std::exp(-gate[i])) * up[i] : swiglu_oai(gate[i], up[i]);
        std::vector<double> down = matvec(layer.expert_down[e], gate);
        add(down, layer.expert_down_bias[e], variant.no_biases);
        for (int64_t i = 0; i < d; ++i) out[i] += weights[r] / total * down[i];
      }
      for (int64_t i = 0; i < d; ++i) x[t][i] += out[i];
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

}  // namespace tandem::gpt_oss_reference
