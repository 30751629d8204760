// Reference sampling chain (see sampler_reference.h): each stage as its definition reads.
#include "engine/sampler_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

namespace tandem {
namespace {

using Candidates = std::vector<std::pair<int32_t, double>>;  // (token, probability)

void sort_by_probability(Candidates& c) {
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.second > b.second || (a.second == b.second && a.first < b.first);
  });
}

void normalise(Candidates& c) {
  double sum = 0.0;
  for (const auto& [id, p] : c) sum += p;
  for (auto& [id, p] : c) p /= sum;
}

}  // namespace

std::vector<std::pair<int32_t, double>> reference_distribution(const SamplingParams& params,
                                                               std::span<const float> logits,
                                                               std::span<const int32_t> history,
                                                               std::span<const int32_t> suppressed, double xtc_uniform,
                                                               double mirostat_mu) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<float> l(logits.begin(), logits.end());
  for (float& x : l)
    if (std::isnan(x)) x = -std::numeric_limits<float>::infinity();
  for (const auto& [token, bias] : params.logit_bias) l[token] += bias;
  // Repetition, presence and frequency penalties over the window, once per distinct token.
  std::span<const int32_t> window = history;
  if (params.repeat_last_n == 0) window = {};
  if (params.repeat_last_n > 0 && window.size() > static_cast<size_t>(params.repeat_last_n))
    window = window.last(static_cast<size_t>(params.repeat_last_n));
  std::map<int32_t, int32_t> counts;
  for (int32_t id : window) ++counts[id];
  for (const auto& [id, count] : counts) {
    float& x = l[id];
    if (params.repetition_penalty != 1.0f) x = x > 0.0f ? x / params.repetition_penalty : x * params.repetition_penalty;
    x -= params.presence_penalty + static_cast<float>(count) * params.frequency_penalty;
  }
  apply_dry_reference(params.dry, history, l);
  for (int32_t id : suppressed) l[id] = -std::numeric_limits<float>::infinity();
  if (!params.allowed_tokens.empty())
    for (size_t i = 0; i < l.size(); ++i)
      if (std::find(params.allowed_tokens.begin(), params.allowed_tokens.end(), static_cast<int32_t>(i)) ==
          params.allowed_tokens.end())
        l[i] = -std::numeric_limits<float>::infinity();

  // Temperature softmax over every token with a finite logit.
  double max = -kInf;
  for (float x : l) max = std::max(max, static_cast<double>(x));
  Candidates c;
  for (size_t i = 0; i < l.size(); ++i) {
    const double w = std::exp((static_cast<double>(l[i]) - max) / params.temperature);
    if (w > 0.0) c.emplace_back(static_cast<int32_t>(i), w);
  }
  normalise(c);
  sort_by_probability(c);
  if (params.mirostat == 2) {  // the tokens whose surprise is at most mu, at least one
    size_t keep = 0;
    while (keep < c.size() && -std::log2(c[keep].second) <= mirostat_mu) ++keep;
    c.resize(std::max<size_t>(keep, 1));
    normalise(c);
    return c;
  }
  if (params.mirostat == 1) {  // the top k, k from the Zipf exponent of the top 100 and mu
    double sum_ti_bi = 0.0, sum_ti_sq = 0.0;
    for (size_t i = 0; i + 1 < std::min<size_t>(100, c.size()); ++i) {
      const double t = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
      sum_ti_bi += t * std::log(c[i].second / c[i + 1].second);
      sum_ti_sq += t * t;
    }
    const double s_hat = sum_ti_bi / sum_ti_sq, eps = s_hat - 1.0;
    const double k =
        std::pow(eps * std::exp2(mirostat_mu) / (1.0 - std::pow(static_cast<double>(l.size()), -eps)), 1.0 / s_hat);
    if (std::isfinite(k))
      c.resize(std::clamp<size_t>(static_cast<size_t>(std::min(std::max(k, 1.0), 1e18)), 1, c.size()));
    normalise(c);
    return c;
  }
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < c.size()) c.resize(static_cast<size_t>(params.top_k));
  normalise(c);

  if (params.typical_p < 1.0f) {
    double entropy = 0.0;
    for (const auto& [id, p] : c) entropy -= p * std::log(p);
    Candidates by_surprise = c;
    std::stable_sort(by_surprise.begin(), by_surprise.end(), [entropy](const auto& a, const auto& b) {
      return std::abs(-std::log(a.second) - entropy) < std::abs(-std::log(b.second) - entropy);
    });
    double cumulative = 0.0;
    size_t keep = by_surprise.size();
    for (size_t i = 0; i < by_surprise.size(); ++i) {
      cumulative += by_surprise[i].second;
      if (cumulative >= params.typical_p) {
        keep = i + 1;
        break;
      }
    }
    by_surprise.resize(keep);
    c = by_surprise;
    normalise(c);
    sort_by_probability(c);
  }

  // Top-p and min-p, both on this distribution: each keeps a prefix, the shorter one stays.
  size_t keep = c.size();
  if (params.top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < c.size(); ++i) {
      cumulative += c[i].second;
      if (cumulative >= params.top_p) {
        keep = std::min(keep, i + 1);
        break;
      }
    }
  }
  if (params.min_p > 0.0f) {
    size_t above = 0;
    while (above < c.size() && c[above].second >= std::min(params.min_p, 1.0f) * c[0].second) ++above;
    keep = std::min(keep, above);
  }
  c.resize(keep);
  normalise(c);

  if (params.xtc_probability > 0.0f && params.xtc_threshold <= 0.5f && c.size() >= 2 &&
      xtc_uniform < params.xtc_probability) {
    size_t above = 0;
    while (above < c.size() && c[above].second >= params.xtc_threshold) ++above;
    if (above >= 2) c.erase(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(above - 1));
    normalise(c);
  }
  return c;
}

}  // namespace tandem
