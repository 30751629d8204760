// The attention formula in double, the reference every attention kernel test holds the levels
// against: one query head over K/V rows given as floats, with the optional soft-cap (Gemma 2)
// and sink logit (gpt-oss) the kernels take.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace tandem {

// K and V rows [n_slots, kv_width] as floats (a head starts at a kv_offset into a row), and
// the position -> row table of a sequence.
struct ReferenceKv {
  const float* keys = nullptr;
  const float* values = nullptr;
  int64_t kv_width = 0;
  const int32_t* slots = nullptr;
};

// One query head's output over positions 0..n_ctx-1: scores q·k / sqrt(head_dim), soft-capped
// to cap·tanh(score / cap) when cap > 0, softmax over the scores and, when there is one, the
// sink logit, whose weight goes to no value.
inline std::vector<double> reference_attention(const float* q, const ReferenceKv& kv, int64_t kv_offset, int64_t n_ctx,
                                               int64_t head_dim, double cap = 0.0,
                                               std::optional<double> sink = std::nullopt) {
  std::vector<double> weights(static_cast<size_t>(n_ctx));
  double max_score = sink.value_or(-INFINITY);
  for (int64_t p = 0; p < n_ctx; ++p) {
    const float* k = kv.keys + kv.slots[p] * kv.kv_width + kv_offset;
    double dot = 0.0;
    for (int64_t i = 0; i < head_dim; ++i) dot += static_cast<double>(q[i]) * k[i];
    double score = dot / std::sqrt(static_cast<double>(head_dim));
    if (cap > 0.0) score = cap * std::tanh(score / cap);
    weights[static_cast<size_t>(p)] = score;
    max_score = std::max(max_score, score);
  }
  double denominator = sink ? std::exp(*sink - max_score) : 0.0;
  for (double& w : weights) denominator += (w = std::exp(w - max_score));
  std::vector<double> out(static_cast<size_t>(head_dim), 0.0);
  for (int64_t p = 0; p < n_ctx; ++p)
    for (int64_t i = 0; i < head_dim; ++i)
      out[static_cast<size_t>(i)] +=
          weights[static_cast<size_t>(p)] / denominator * kv.values[kv.slots[p] * kv.kv_width + kv_offset + i];
  return out;
}

}  // namespace tandem
