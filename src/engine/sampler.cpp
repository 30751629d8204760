// Sampler implementation: penalties (DRY in dry_penalty.cpp), temperature softmax, top-k /
// typical-p / top-p / min-p / XTC filtering and the seeded draw. Works on one logits row at a time in scratch allocated
// once; the only full sort is top-p with neither top-k nor min-p to shrink the candidate set first.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"

namespace tandem {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Top-p compares a float-accumulated cumulative mass against p; without some slack, a set
// whose mass is exactly p on paper (0.5 + 0.25 at p = 0.75) would flip on rounding.
constexpr double kTopPSlack = 1e-6;

void validate(const SamplingParams& p, int64_t vocab_size) {
  TANDEM_CHECK_INPUT(vocab_size > 0 && vocab_size <= std::numeric_limits<int32_t>::max(),
                     "sampler: vocab_size {} out of range", vocab_size);
  TANDEM_CHECK_INPUT(!std::isnan(p.temperature), "sampler: temperature is NaN");
  TANDEM_CHECK_INPUT(!std::isnan(p.top_p), "sampler: top_p is NaN");
  TANDEM_CHECK_INPUT(!std::isnan(p.min_p), "sampler: min_p is NaN");
  TANDEM_CHECK_INPUT(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f,
                     "sampler: repetition_penalty must be a positive number, got {}", p.repetition_penalty);
  TANDEM_CHECK_INPUT(std::isfinite(p.presence_penalty), "sampler: presence_penalty not finite");
  TANDEM_CHECK_INPUT(std::isfinite(p.frequency_penalty), "sampler: frequency_penalty not finite");
  TANDEM_CHECK_INPUT(!std::isnan(p.typical_p), "sampler: typical_p is NaN");
  TANDEM_CHECK_INPUT(std::isfinite(p.xtc_probability) && std::isfinite(p.xtc_threshold),
                     "sampler: xtc_probability and xtc_threshold must be finite");
  TANDEM_CHECK_INPUT(std::isfinite(p.dry.multiplier) && std::isfinite(p.dry.base),
                     "sampler: dry_multiplier and dry_base must be finite");
  TANDEM_CHECK_INPUT(p.dry.allowed_length >= 1, "sampler: dry_allowed_length must be at least 1, got {}",
                     p.dry.allowed_length);
  TANDEM_CHECK_INPUT(p.dry.penalty_last_n >= -1, "sampler: dry_penalty_last_n must be -1 or more, got {}",
                     p.dry.penalty_last_n);
  for (const std::vector<int32_t>& breaker : p.dry.breakers) {
    TANDEM_CHECK_INPUT(!breaker.empty(), "sampler: an empty DRY sequence breaker");
    for (int32_t id : breaker)
      TANDEM_CHECK_INPUT(id >= 0 && id < vocab_size, "sampler: DRY breaker token {} outside the vocabulary", id);
  }
  for (int32_t token : p.allowed_tokens)
    TANDEM_CHECK_INPUT(token >= 0 && token < vocab_size, "allowed_token_ids: token {} is outside the vocabulary of {}",
                       token, vocab_size);
  TANDEM_CHECK_INPUT(p.mirostat >= 0 && p.mirostat <= 2, "sampler: mirostat must be 0, 1 or 2, got {}", p.mirostat);
  TANDEM_CHECK_INPUT(std::isfinite(p.mirostat_tau) && std::isfinite(p.mirostat_eta),
                     "sampler: mirostat_tau and mirostat_eta must be finite");
  TANDEM_CHECK_INPUT(p.mirostat == 0 || (p.top_k <= 0 && p.top_p >= 1.0f && p.min_p <= 0.0f && p.typical_p >= 1.0f &&
                                         p.xtc_probability <= 0.0f),
                     "sampler: mirostat replaces top-k, top-p, min-p, typical-p and XTC; they must be off");
  TANDEM_CHECK_INPUT(std::is_sorted(p.dry.breakers.begin(), p.dry.breakers.end()),
                     "sampler: DRY breakers must be sorted (dry_breaker_sequences)");
  for (const auto& [token, bias] : p.logit_bias) {
    TANDEM_CHECK_INPUT(token >= 0 && token < vocab_size, "logit_bias: token {} is outside the vocabulary of {}", token,
                       vocab_size);
    TANDEM_CHECK_INPUT(std::isfinite(bias), "logit_bias: the bias of token {} is not a finite number", token);
  }
}

// Turns the penalised logits in `work` into unnormalised softmax weights at temperature t,
// in place, and lists the tokens of positive weight in ids[0, n); returns n >= 1.
int64_t softmax_weights(std::vector<float>& work, std::vector<int32_t>& ids, float t) {
  const auto vocab_size = static_cast<int64_t>(work.size());
  float max_logit = -kInf;
  for (int64_t i = 0; i < vocab_size; ++i) max_logit = std::max(max_logit, work[i]);
  // Limits of the softmax where (l - max) is undefined: +inf tokens share all the mass, and
  // an all -inf row is the limit of all-equal logits, i.e. uniform.
  if (max_logit == kInf) {
    for (int64_t i = 0; i < vocab_size; ++i) work[i] = work[i] == kInf ? 0.0f : -kInf;
    max_logit = 0.0f;
  } else if (max_logit == -kInf) {
    std::fill(work.begin(), work.end(), 0.0f);
    max_logit = 0.0f;
  }

  // Unnormalised weights exp((l - max) / T): the max token weighs exactly 1, so min-p can
  // compare weights against min_p directly. Subtracting before dividing keeps a tiny T from
  // overflowing. Zero weights can never be drawn, so they are not candidates.
  int64_t n = 0;
  for (int64_t i = 0; i < vocab_size; ++i) {
    const float d = work[i] - max_logit;
    // d == 0 is spelt out so a subnormal or infinite T cannot turn the max into 0/0 or
    // inf/inf; any other NaN (-inf logit at T = inf) is a zero weight.
    float w = d == 0.0f ? 1.0f : std::exp(d / t);
    if (!(w > 0.0f)) w = 0.0f;
    work[i] = w;
    if (w > 0.0f) ids[n++] = static_cast<int32_t>(i);
  }
  TANDEM_ASSERT(n >= 1);
  return n;
}

// The summed weight of candidates ids[0, n), in double, in candidate order.
double mass_of(const std::vector<float>& w, const std::vector<int32_t>& ids, int64_t n) {
  double mass = 0.0;
  for (int64_t i = 0; i < n; ++i) mass += w[ids[i]];
  return mass;
}

// probs[i] = the weight of candidate ids[i] over `mass`, for i < n.
void normalise(const std::vector<float>& w, const std::vector<int32_t>& ids, int64_t n, double mass,
               std::vector<float>& probs) {
  for (int64_t i = 0; i < n; ++i) probs[i] = static_cast<float>(w[ids[i]] / mass);
}

}  // namespace

Sampler::Sampler(SamplingParams params, int64_t vocab_size)
    : params_(params), vocab_size_(vocab_size), rng_(params.seed), mirostat_mu_(2.0f * params.mirostat_tau) {
  validate(params_, vocab_size_);
  work_.resize(vocab_size_);
  ids_.resize(vocab_size_);
  probs_.resize(vocab_size_);
  counts_.assign(vocab_size_, 0);
  if (params_.typical_p < 1.0f) typical_keys_.resize(vocab_size_);
  if (!params_.allowed_tokens.empty()) {
    allowed_.assign(vocab_size_, 0);
    for (int32_t token : params_.allowed_tokens) allowed_[token] = 1;
  }
  if (params_.dry.enabled()) dry_.longest.assign(vocab_size_, 0);
}

void Sampler::set_suppressed(std::span<const int32_t> ids) {
  suppressed_.clear();
  for (int32_t id : ids)
    if (id >= 0 && id < vocab_size_) suppressed_.push_back(id);
}

void Sampler::reseed(uint64_t seed) {
  params_.seed = seed;
  rng_.seed(seed);
}

void Sampler::penalise(std::span<const float> logits, std::span<const int32_t> history) {
  TANDEM_ASSERT(static_cast<int64_t>(logits.size()) == vocab_size_);
  for (int64_t i = 0; i < vocab_size_; ++i) {
    work_[i] = std::isnan(logits[i]) ? -kInf : logits[i];
  }
  for (const auto& [token, bias] : params_.logit_bias) work_[token] += bias;
  apply_penalties(history);
  if (params_.dry.enabled()) {
    for (int32_t id : history)
      TANDEM_CHECK_INPUT(id >= 0 && id < vocab_size_, "sampler: history token {} outside vocabulary of {}", id,
                         vocab_size_);
    apply_dry(params_.dry, history, work_, dry_);
  }
  for (int32_t id : suppressed_) work_[id] = -kInf;
  if (!allowed_.empty())
    for (int64_t i = 0; i < vocab_size_; ++i)
      if (!allowed_[i]) work_[i] = -kInf;
}

void Sampler::apply_penalties(std::span<const int32_t> history) {
  const bool any_penalty =
      params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!any_penalty || params_.repeat_last_n == 0 || history.empty()) return;

  std::span<const int32_t> window = history;
  if (params_.repeat_last_n > 0 && window.size() > static_cast<size_t>(params_.repeat_last_n)) {
    window = window.last(params_.repeat_last_n);
  }
  // Check every id before touching counts_, so a bad one leaves the scratch all zero.
  for (int32_t id : window) {
    TANDEM_CHECK_INPUT(id >= 0 && id < vocab_size_, "sampler: history token {} outside vocabulary of {}", id,
                       vocab_size_);
  }
  for (int32_t id : window) ++counts_[id];
  // Each distinct token is penalised once; zeroing its count marks it done and restores the
  // all-zero invariant for the next call without a vocab-sized clear.
  for (int32_t id : window) {
    const int32_t count = counts_[id];
    if (count == 0) continue;
    counts_[id] = 0;
    float& l = work_[id];
    if (params_.repetition_penalty != 1.0f) {
      l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    }
    l -= params_.presence_penalty + static_cast<float>(count) * params_.frequency_penalty;
  }
}

int32_t Sampler::argmax() const {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab_size_; ++i) {
    if (work_[i] > work_[best]) best = i;  // strict: ties keep the lower id
  }
  return static_cast<int32_t>(best);
}

int64_t Sampler::build_distribution() {
  int64_t n = softmax_weights(work_, ids_, params_.temperature);
  const std::vector<float>& w = work_;
  auto more_probable = [&w](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
  auto first = ids_.begin();

  // Every filter keeps a prefix of the candidates in (probability desc, id asc) order, so
  // they can run in whichever order is cheapest as long as each sees the right numbers.
  if (params_.mirostat != 0) {
    n = mirostat_filter(n);
    normalise(w, ids_, n, mass_of(w, ids_, n), probs_);
    return n;
  }
  if (params_.top_k > 0 && params_.top_k < n) {
    std::nth_element(first, first + params_.top_k, first + n, more_probable);
    n = params_.top_k;
  }
  // Typical-p keeps a set of its own order (by surprise), not a prefix: its survivors are
  // moved to the front, and the filters after it see them only.
  if (params_.typical_p < 1.0f) n = typical_filter(n);
  // Top-p measures mass relative to what top-k and typical-p left (as if renormalised).
  double mass = 0.0;
  float max_weight = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    mass += w[ids_[i]];
    max_weight = std::max(max_weight, w[ids_[i]]);
  }

  // Min-p is a threshold on the weight (p / p_max), known before sorting: partitioning
  // first means only the survivors, usually a handful of a 128k vocab, get sorted. The most
  // probable token weighs 1 unless typical-p removed it.
  int64_t n_sorted = n;
  if (params_.min_p > 0.0f) {
    const float threshold = std::min(params_.min_p, 1.0f) * max_weight;
    n_sorted = std::partition(first, first + n, [&w, threshold](int32_t id) { return w[id] >= threshold; }) - first;
  }
  std::sort(first, first + n_sorted, more_probable);

  int64_t n_keep = n_sorted;
  if (params_.top_p < 1.0f) {
    // Smallest prefix whose mass reaches p; if min-p cut first, the prefix is min-p's.
    const double target = static_cast<double>(params_.top_p) * mass * (1.0 - kTopPSlack);
    double cumulative = 0.0;
    for (int64_t i = 0; i < n_sorted; ++i) {
      cumulative += w[ids_[i]];
      if (cumulative >= target) {
        n_keep = i + 1;
        break;
      }
    }
  }

  double kept = mass_of(w, ids_, n_keep);
  if (const int64_t cut = xtc_cut(n_keep, kept); cut > 0) {
    std::copy(first + cut, first + n_keep, first);
    n_keep -= cut;
    kept = mass_of(w, ids_, n_keep);
  }
  normalise(w, ids_, n_keep, kept, probs_);
  return n_keep;
}

int64_t Sampler::typical_filter(int64_t n) {
  const std::vector<float>& w = work_;
  double mass = 0.0;
  for (int64_t i = 0; i < n; ++i) mass += w[ids_[i]];
  // Entropy of the candidates' distribution, then each one's distance from it in surprise.
  double entropy = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double p = w[ids_[i]] / mass;
    entropy -= p * std::log(p);
  }
  for (int64_t i = 0; i < n; ++i)
    typical_keys_[ids_[i]] = static_cast<float>(std::abs(-std::log(w[ids_[i]] / mass) - entropy));
  const std::vector<float>& key = typical_keys_;
  std::sort(ids_.begin(), ids_.begin() + n, [&w, &key](int32_t a, int32_t b) {
    if (key[a] != key[b]) return key[a] < key[b];
    return w[a] > w[b] || (w[a] == w[b] && a < b);
  });
  const double target = static_cast<double>(params_.typical_p) * mass * (1.0 - kTopPSlack);
  double cumulative = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    cumulative += w[ids_[i]];
    if (cumulative >= target) return i + 1;
  }
  return n;
}

int64_t Sampler::xtc_cut(int64_t n, double mass) {
  // As llama.cpp: off, or nothing to do, without drawing; else one uniform per distribution.
  if (params_.xtc_probability <= 0.0f || params_.xtc_threshold > 0.5f || n < 2) return 0;
  if (next_uniform() >= static_cast<double>(params_.xtc_probability)) return 0;
  // The candidates are sorted: those at or above the threshold lead; all but the last go.
  int64_t last_above = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (work_[ids_[i]] / mass < static_cast<double>(params_.xtc_threshold)) break;
    last_above = i;
  }
  return std::max<int64_t>(last_above, 0);
}

int64_t Sampler::mirostat_filter(int64_t n) {
  const std::vector<float>& w = work_;
  auto more_probable = [&w](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
  const auto first = ids_.begin();
  double mass = 0.0;
  for (int64_t i = 0; i < n; ++i) mass += w[ids_[i]];
  if (params_.mirostat == 2) {
    // Surprise -log2(w / mass) <= mu, i.e. w >= mass * 2^-mu; at least the most probable.
    const double threshold = mass * std::exp2(-static_cast<double>(mirostat_mu_));
    int64_t kept = std::partition(first, first + n, [&w, threshold](int32_t id) { return w[id] >= threshold; }) - first;
    if (kept == 0) {
      std::iter_swap(first, std::min_element(first, first + n, more_probable));
      kept = 1;
    }
    std::sort(first, first + kept, more_probable);
    return kept;
  }
  // v1: s_hat, the Zipf exponent fitted to the top m = 100 tokens' ratios, then the k that
  // makes the expected surprise mu.
  constexpr int64_t kM = 100;
  const int64_t top = std::min(kM, n);
  std::partial_sort(first, first + top, first + n, more_probable);
  double sum_ti_bi = 0.0, sum_ti_sq = 0.0;
  for (int64_t i = 0; i + 1 < top; ++i) {
    const double t_i = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
    const double b_i = std::log(static_cast<double>(w[ids_[i]]) / static_cast<double>(w[ids_[i + 1]]));
    sum_ti_bi += t_i * b_i;
    sum_ti_sq += t_i * t_i;
  }
  const double s_hat = sum_ti_bi / sum_ti_sq;
  const double epsilon_hat = s_hat - 1.0;
  const double k = std::pow(epsilon_hat * std::exp2(static_cast<double>(mirostat_mu_)) /
                                (1.0 - std::pow(static_cast<double>(vocab_size_), -epsilon_hat)),
                            1.0 / s_hat);
  // One candidate (no ratios), or a flat top (s_hat 1: 0/0): nothing to estimate, keep them all.
  const int64_t keep = std::isfinite(k) ? std::clamp<int64_t>(static_cast<int64_t>(std::min(k, 1e18)), 1, n) : n;
  if (keep > top) {
    std::nth_element(first + top, first + keep, first + n, more_probable);
    std::sort(first + top, first + keep, more_probable);
  }
  return keep;
}

double Sampler::next_uniform() {
  // std::uniform_real_distribution differs between standard libraries; taking the top 53
  // bits of the mt19937_64 output ourselves keeps a seed's draws identical everywhere.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  penalise(logits, history);
  if (params_.temperature <= 0.0f) return argmax();

  const int64_t n = build_distribution();
  const auto count = static_cast<size_t>(n);
  const TokenDistribution distribution{std::span<const int32_t>(ids_).first(count),
                                       std::span<const float>(probs_).first(count)};
  const int32_t token = draw(distribution, next_uniform());
  if (params_.mirostat != 0) {
    // The surprise of what was drawn pulls mu towards the target tau.
    const double surprise = -std::log2(static_cast<double>(distribution.probability_of(token)));
    mirostat_mu_ -= params_.mirostat_eta * static_cast<float>(surprise - params_.mirostat_tau);
  }
  return token;
}

int32_t Sampler::draw(TokenDistribution distribution, double u) {
  TANDEM_ASSERT(!distribution.ids.empty() && distribution.ids.size() == distribution.probs.size());
  double cumulative = 0.0;
  for (size_t i = 0; i < distribution.ids.size(); ++i) {
    cumulative += distribution.probs[i];
    if (u < cumulative) return distribution.ids[i];
  }
  // The float probabilities may sum to a hair under 1 and u landed in that gap.
  return distribution.ids.back();
}

TokenDistribution Sampler::probabilities(std::span<const float> logits, std::span<const int32_t> history) {
  penalise(logits, history);
  int64_t n = 1;
  if (params_.temperature <= 0.0f) {
    ids_[0] = argmax();
    probs_[0] = 1.0f;
  } else {
    n = build_distribution();
  }
  const auto count = static_cast<size_t>(n);
  return {std::span<const int32_t>(ids_).first(count), std::span<const float>(probs_).first(count)};
}

float TokenDistribution::probability_of(int32_t token) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] == token) return probs[i];
  return 0.0f;
}

std::vector<std::pair<int32_t, float>> Sampler::distribution(std::span<const float> logits,
                                                             std::span<const int32_t> history) {
  penalise(logits, history);
  if (params_.temperature <= 0.0f) return {{argmax(), 1.0f}};

  const int64_t n = build_distribution();
  std::vector<std::pair<int32_t, float>> result;
  result.reserve(n);
  for (int64_t i = 0; i < n; ++i) result.emplace_back(ids_[i], probs_[i]);
  return result;
}

}  // namespace tandem
