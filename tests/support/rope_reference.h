// Test helper for the RoPE scaling and Phi-3 tests (tests/model, tests/hf): a float64 reference
// forward pass written here from the definitions (not from src/), taking each rotary pair's
// frequency and the cos/sin magnitude as the scaling defines them; the scalings' frequencies from the papers'
// and HF transformers' definitions; and a GGUF rewriter that turns a tests/support random model
// into a scaled one (rope.scaling.* keys and factor tensors) or a phi3 one (fused attn_qkv and
// gate+up ffn_up, as llama.cpp's converter writes them).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "io/gguf_file.h"
#include "io/gguf_writer.h"
#include "model/forward.h"
#include "support/random_model.h"

namespace tandem::rope_test {

using test_support::RandomMatrix;
using test_support::RandomModelSpec;
using test_support::RandomWeights;

// A scaling as the test states it.
struct Scaling {
  std::string type = "none";  // none, linear, yarn, longrope, llama3
  double factor = 1.0;        // s
  int64_t original = 0;       // L
  double beta_fast = 32.0, beta_slow = 1.0, ext_factor = 1.0;
  bool truncate = true;                // YaRN: ramp ends at whole pairs (HF's "truncate": false keeps them fractional)
  double attn_factor = 1.0;            // the file's rope.scaling.attn_factor
  std::vector<float> long_f, short_f;  // LongRoPE
  double llama3_low = 1.0, llama3_high = 4.0;
};

// What a deliberately wrong reference leaves out.
struct Variant {
  bool plain_frequencies = false;  // base^(-2i/d), ignoring the scaling
  bool no_magnitude = false;       // cos/sin unscaled
  bool short_for_long = false;     // LongRoPE: the other factor set
  bool adjacent_pairs = false;     // (2i, 2i+1) instead of (i, i + d/2) for a half-split model
  bool swap_gate_up = false;       // Phi-3: up rows taken as the gate
  bool rounded_ramp = false;       // YaRN: the ramp's ends at whole pairs even when truncate is off
};

// Pair i's frequency, from the definitions:
//  linear (Chen et al., position interpolation): theta_i / s.
//  YaRN (Peng et al., "YaRN", sec. 3.2 "NTK-by-parts"; HF _compute_yarn_parameters): with
//   r(i) = L / wavelength_i = L theta_i / (2 pi), pairs with r >= beta_fast keep theta_i, those
//   with r <= beta_slow get theta_i / s, linear in i between; HF and llama.cpp take the bounds
//   at whole pairs: low = floor(d ln(L / (2 pi beta_fast)) / (2 ln b)), high = ceil(... beta_slow)
//   (HF without floor and ceil when rope_scaling says "truncate": false, as gpt-oss's does).
//  LongRoPE (Ding et al.; HF _compute_longrope_parameters): theta_i / lambda_i, lambda the long
//   factors when the context exceeds L, else the short ones.
//  Llama 3 (HF _compute_llama3_parameters): wavelength > L / low: theta / s; < L / high: theta;
//   between, (1 - a) theta / s + a theta with a = (L / wavelength - low) / (high - low).
inline std::vector<double> frequencies(const Scaling& s, int64_t d, double base, int64_t context, Variant v = {}) {
  std::vector<double> out;
  for (int64_t i = 0; i < d / 2; ++i) {
    const double theta = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
    double f = theta;
    if (v.plain_frequencies) {
    } else if (s.type == "linear") {
      f = theta / s.factor;
    } else if (s.type == "yarn") {
      auto bound = [&](double rotations) {
        return static_cast<double>(d) *
               std::log(static_cast<double>(s.original) / (2.0 * std::numbers::pi * rotations)) /
               (2.0 * std::log(base));
      };
      const bool whole_pairs = s.truncate || v.rounded_ramp;
      const double low = std::max(0.0, whole_pairs ? std::floor(bound(s.beta_fast)) : bound(s.beta_fast));
      const double high =
          std::min(static_cast<double>(d - 1), whole_pairs ? std::ceil(bound(s.beta_slow)) : bound(s.beta_slow));
      const double span = high > low ? high - low : 0.001;
      const double interpolated_share = std::clamp((static_cast<double>(i) - low) / span, 0.0, 1.0);
      const double extrapolated = (1.0 - interpolated_share) * s.ext_factor;
      f = theta * extrapolated + theta / s.factor * (1.0 - extrapolated);
    } else if (s.type == "longrope") {
      const bool long_factors = (context > s.original) != v.short_for_long;
      f = theta / (long_factors ? s.long_f : s.short_f)[static_cast<size_t>(i)];
    } else if (s.type == "llama3") {
      const double wavelength = 2.0 * std::numbers::pi / theta;
      const double L = static_cast<double>(s.original);
      if (wavelength > L / s.llama3_low) {
        f = theta / s.factor;
      } else if (wavelength >= L / s.llama3_high) {
        const double a = (L / wavelength - s.llama3_low) / (s.llama3_high - s.llama3_low);
        f = (1.0 - a) * theta / s.factor + a * theta;
      }
    }
    out.push_back(f);
  }
  return out;
}

// cos and sin are multiplied by: YaRN 0.1 ln s + 1 (YaRN eq. 22, sqrt(1/t)); LongRoPE
// sqrt(1 + ln s / ln L) (Phi-3's scaling factor); either times the file's attn_factor.
inline double magnitude(const Scaling& s, Variant v = {}) {
  if (v.no_magnitude) return 1.0;
  if (s.type == "yarn") return s.attn_factor * (s.factor > 1.0 ? 0.1 * std::log(s.factor) + 1.0 : 1.0);
  if (s.type == "longrope") return std::sqrt(1.0 + std::log(s.factor) / std::log(static_cast<double>(s.original)));
  return s.attn_factor;
}

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

// One head: pair i ((i, i + d/2) half-split, (2i, 2i+1) adjacent) turns by position x freq[i],
// then both elements are scaled by `mag`; elements from d on stay.
inline void rope_head(double* head, const std::vector<double>& freq, double mag, int64_t position, bool half_split) {
  const auto half = static_cast<int64_t>(freq.size());
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(position) * freq[static_cast<size_t>(i)];
    const int64_t a_at = half_split ? i : 2 * i, b_at = half_split ? i + half : 2 * i + 1;
    const double a = head[a_at], b = head[b_at];
    head[a_at] = mag * (a * std::cos(angle) - b * std::sin(angle));
    head[b_at] = mag * (a * std::sin(angle) + b * std::cos(angle));
  }
}

// Logits [n_tokens, vocab] for one sequence at positions 0..n-1 (Llama / Phi-3 block: RMSNorm,
// attention with RoPE, SwiGLU FFN; Phi-3 is the same computation, its fusion only a file layout).
inline std::vector<double> reference_logits(const RandomModelSpec& s, const RandomWeights& w,
                                            const std::vector<int32_t>& tokens, const std::vector<double>& freq,
                                            double mag, bool half_split, Variant v = {}) {
  const int64_t n = static_cast<int64_t>(tokens.size()), d = s.d_model, hd = s.head_dim();
  const int64_t group = s.n_heads / s.n_kv_heads;
  const bool pairs_half_split = half_split != v.adjacent_pairs;
  std::vector<std::vector<double>> x(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < d; ++i) x[t].push_back(w.token_embedding.at(tokens[static_cast<size_t>(t)], i));
  for (const auto& layer : w.layers) {
    std::vector<std::vector<double>> q(n), k(n), vv(n);
    for (int64_t t = 0; t < n; ++t) {
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.attn_norm, s.rms_norm_eps);
      q[t] = matvec(layer.wq, normed), k[t] = matvec(layer.wk, normed), vv[t] = matvec(layer.wv, normed);
      for (int64_t h = 0; h < s.n_heads; ++h) rope_head(q[t].data() + h * hd, freq, mag, t, pairs_half_split);
      for (int64_t h = 0; h < s.n_kv_heads; ++h) rope_head(k[t].data() + h * hd, freq, mag, t, pairs_half_split);
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
          for (int64_t i = 0; i < hd; ++i) attn[h * hd + i] += scores[p] / sum * vv[p][kv + i];
      }
      const std::vector<double> projected = matvec(layer.wo, attn);
      for (int64_t i = 0; i < d; ++i) x[t][i] += projected[i];
      std::vector<double> normed = x[t];
      rmsnorm_in_place(normed.data(), layer.ffn_norm, s.rms_norm_eps);
      std::vector<double> gate = matvec(v.swap_gate_up ? layer.w_up : layer.w_gate, normed);
      const std::vector<double> up = matvec(v.swap_gate_up ? layer.w_gate : layer.w_up, normed);
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
inline double worst_relative_error(std::span<const float> engine, const std::vector<double>& reference, int64_t vocab) {
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

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& token : tokens) token = id(rng);
  return tokens;
}

// Feeds `tokens` as one sequence in batches of `step`, every row asking for logits.
inline std::vector<float> run_in_steps(Forward& forward, const std::vector<int32_t>& tokens, int64_t step) {
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

// Rewrites the GGUF at `path` in place: `keys` added (or replaced), `tensors` (name -> f32
// values) added, and with `fuse_phi3` each layer's attn_q/k/v rows concatenated into attn_qkv
// and ffn_gate, ffn_up rows into ffn_up (gate first), as llama.cpp's phi3 files hold them.
inline void rewrite_gguf(const std::string& path, const std::map<std::string, GgufValue>& keys,
                         const std::map<std::string, std::vector<float>>& tensors, bool fuse_phi3) {
  const std::vector<uint8_t> original = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();
  const GgufFile file = GgufFile::parse(original);
  GgufWriter writer;
  for (const auto& [key, value] : file.metadata()) writer.set(key, value);
  for (const auto& [key, value] : keys) writer.set(key, value);
  auto bytes_of = [&](const std::string& name) {
    const GgufTensorInfo* info = file.find_tensor(name);
    const auto* data = static_cast<const uint8_t*>(info->view.data);
    return std::vector<uint8_t>(data, data + info->view.n_bytes());
  };
  for (const GgufTensorInfo& info : file.tensors()) {
    const std::string& name = info.name;
    std::vector<int64_t> shape(info.view.shape.begin(), info.view.shape.begin() + info.view.n_dims);
    if (fuse_phi3 &&
        (name.ends_with(".attn_k.weight") || name.ends_with(".attn_v.weight") || name.ends_with(".ffn_up.weight")))
      continue;  // joined to attn_q / ffn_gate below
    if (fuse_phi3 && (name.ends_with(".attn_q.weight") || name.ends_with(".ffn_gate.weight"))) {
      const std::string prefix = name.substr(0, name.find('.', 4) + 1);  // "blk.N."
      const bool attention = name.ends_with(".attn_q.weight");
      const std::vector<std::string> parts = attention ? std::vector<std::string>{"attn_q", "attn_k", "attn_v"}
                                                       : std::vector<std::string>{"ffn_gate", "ffn_up"};
      std::vector<uint8_t> joined;
      int64_t rows = 0;
      for (const std::string& part : parts) {
        const std::vector<uint8_t> bytes = bytes_of(prefix + part + ".weight");
        joined.insert(joined.end(), bytes.begin(), bytes.end());
        rows += file.find_tensor(prefix + part + ".weight")->view.dim(0);
      }
      writer.add_tensor(prefix + (attention ? "attn_qkv.weight" : "ffn_up.weight"), info.view.dtype, {rows, shape[1]},
                        std::move(joined));
      continue;
    }
    writer.add_tensor(name, info.view.dtype, shape, bytes_of(name));
  }
  for (const auto& [name, values] : tensors) {
    std::vector<uint8_t> bytes(values.size() * sizeof(float));
    std::memcpy(bytes.data(), values.data(), bytes.size());
    writer.add_tensor(name, DType::F32, {static_cast<int64_t>(values.size())}, std::move(bytes));
  }
  writer.write(path);
}

}  // namespace tandem::rope_test
