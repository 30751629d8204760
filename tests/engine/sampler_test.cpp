// Tests for Sampler: the distribution against hand-computed and double-precision reference
// values for each stage (penalties, temperature, top-k, top-p, min-p), greedy and its ties,
// seeded reproducibility, empirical draw frequencies, and a full-size 128k vocabulary.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "base/error.h"

namespace tandem {
namespace {

using Dist = std::vector<std::pair<int32_t, float>>;

// Every filter off, T = 1: the distribution is the plain softmax of the penalised logits.
SamplingParams plain() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

std::vector<double> softmax_ref(const std::vector<double>& logits, double temperature = 1.0) {
  const double max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - max) / temperature);
  for (double& x : p) x /= sum;
  return p;
}

std::set<int32_t> ids_of(const Dist& d) {
  std::set<int32_t> ids;
  for (const auto& [id, p] : d) ids.insert(id);
  return ids;
}

// Checks `d` is sorted, sums to 1 and gives each id its reference probability (0 if absent).
void expect_matches(const Dist& d, const std::vector<double>& ref, double tol = 1e-5) {
  double sum = 0.0;
  std::map<int32_t, float> by_id;
  for (size_t i = 0; i < d.size(); ++i) {
    sum += d[i].second;
    by_id[d[i].first] = d[i].second;
    if (i > 0) {
      EXPECT_TRUE(d[i - 1].second > d[i].second || (d[i - 1].second == d[i].second && d[i - 1].first < d[i].first))
          << "not sorted at " << i;
    }
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
  for (size_t id = 0; id < ref.size(); ++id) {
    const double got = by_id.count(id) ? by_id[id] : 0.0;
    EXPECT_NEAR(got, ref[id], tol) << "token " << id;
  }
}

TEST(Sampler, SoftmaxAtTemperatureOne) {
  Sampler s(plain(), 3);
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  const Dist d = s.distribution(logits, {});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].first, 0);
  EXPECT_EQ(d[1].first, 1);
  EXPECT_EQ(d[2].first, 2);
  EXPECT_NEAR(d[0].second, 0.665, 1e-3);
  EXPECT_NEAR(d[1].second, 0.245, 1e-3);
  EXPECT_NEAR(d[2].second, 0.090, 1e-3);
}

TEST(Sampler, TemperatureScalesLogits) {
  SamplingParams p = plain();
  p.temperature = 0.5f;
  Sampler s(p, 4);
  const std::vector<float> logits = {0.3f, -1.2f, 2.5f, 0.0f};
  expect_matches(s.distribution(logits, {}), softmax_ref({0.3f, -1.2f, 2.5f, 0.0f}, 0.5));
}

TEST(Sampler, AddingAConstantChangesNothing) {
  // Multiples of 1/8 keep logit + constant exact in float, so the results must agree.
  const std::vector<float> logits = {1.5f, -0.25f, 3.0f, 0.125f, -2.0f, 0.75f};
  for (float temperature : {1.0f, 0.7f}) {
    SamplingParams p = plain();
    p.temperature = temperature;
    p.top_k = 5;
    p.top_p = 0.9f;
    p.min_p = 0.02f;
    Sampler s(p, logits.size());
    const Dist base = s.distribution(logits, {});
    for (float c : {10.0f, -37.5f, 1000.0f}) {
      std::vector<float> shifted = logits;
      for (float& x : shifted) x += c;
      const Dist d = s.distribution(shifted, {});
      ASSERT_EQ(d.size(), base.size()) << "c = " << c;
      for (size_t i = 0; i < d.size(); ++i) {
        EXPECT_EQ(d[i].first, base[i].first);
        EXPECT_NEAR(d[i].second, base[i].second, 1e-6);
      }
    }
  }
}

TEST(Sampler, TopKKeepsExactlyK) {
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 1.5f, 0.7f, 3.0f, -0.4f, 1.0f};
  const std::vector<std::vector<int32_t>> expected = {{5}, {5, 1}, {5, 1, 3}, {5, 1, 3, 7}, {5, 1, 3, 7, 4}};
  for (int32_t k = 1; k <= 5; ++k) {
    SamplingParams p = plain();
    p.top_k = k;
    Sampler s(p, logits.size());
    const Dist d = s.distribution(logits, {});
    ASSERT_EQ(static_cast<int32_t>(d.size()), k);
    std::vector<double> kept;
    for (int32_t id : expected[k - 1]) kept.push_back(logits[id]);
    const std::vector<double> ref = softmax_ref(kept);
    for (int32_t i = 0; i < k; ++i) {
      EXPECT_EQ(d[i].first, expected[k - 1][i]);
      EXPECT_NEAR(d[i].second, ref[i], 1e-5);
    }
  }
  // k >= vocab and k <= 0 are off.
  for (int32_t k : {8, 100, 0, -3}) {
    SamplingParams p = plain();
    p.top_k = k;
    Sampler s(p, logits.size());
    EXPECT_EQ(s.distribution(logits, {}).size(), logits.size());
  }
}

TEST(Sampler, TopKTiesKeepLowerIds) {
  SamplingParams p = plain();
  p.top_k = 2;
  Sampler s(p, 5);
  const Dist d = s.distribution(std::vector<float>{1.0f, 2.0f, 1.0f, 2.0f, 2.0f}, {});
  EXPECT_EQ(ids_of(d), (std::set<int32_t>{1, 3}));
}

TEST(Sampler, TopPExactBoundaryWithEqualLogits) {
  // Four equal logits: each 0.25 exactly. Cumulative hits 0.5 exactly after two tokens.
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<std::pair<float, size_t>> cases = {{0.5f, 2},  {0.25f, 1}, {0.2f, 1}, {0.26f, 2},
                                                       {0.75f, 3}, {0.9f, 4},  {0.0f, 1}};
  for (const auto& [top_p, n] : cases) {
    SamplingParams p = plain();
    p.top_p = top_p;
    Sampler s(p, logits.size());
    const Dist d = s.distribution(logits, {});
    ASSERT_EQ(d.size(), n) << "top_p = " << top_p;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(d[i].first, static_cast<int32_t>(i));  // ties -> lower ids first
      EXPECT_NEAR(d[i].second, 1.0 / n, 1e-6);
    }
  }
}

TEST(Sampler, TopPHandComputed) {
  // Logits ln(0.5), ln(0.25), ln(0.15), ln(0.1): probabilities 0.5, 0.25, 0.15, 0.1,
  // cumulative 0.5, 0.75, 0.9, 1.0 (the 0.75 and 0.9 boundaries are equal-to cases).
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.1f), std::log(0.25f)};
  const std::vector<std::pair<float, std::set<int32_t>>> cases = {
      {0.4f, {1}},        {0.5f, {1}},       {0.6f, {1, 3}},       {0.75f, {1, 3}},
      {0.76f, {1, 3, 0}}, {0.9f, {1, 3, 0}}, {0.95f, {1, 3, 0, 2}}};
  for (const auto& [top_p, want] : cases) {
    SamplingParams p = plain();
    p.top_p = top_p;
    Sampler s(p, logits.size());
    const Dist d = s.distribution(logits, {});
    EXPECT_EQ(ids_of(d), want) << "top_p = " << top_p;
  }
  // Kept set renormalised: {1, 3} -> 2/3, 1/3.
  SamplingParams p = plain();
  p.top_p = 0.7f;
  Sampler s(p, logits.size());
  const Dist d = s.distribution(logits, {});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[0].second, 2.0 / 3.0, 1e-5);
  EXPECT_NEAR(d[1].second, 1.0 / 3.0, 1e-5);
}

TEST(Sampler, TopPMeasuresMassAfterTopK) {
  // Top-k = 3 leaves 0.5, 0.25, 0.15 (mass 0.9): renormalised 0.556, 0.278, 0.167, so
  // top_p = 0.8 is reached after two tokens (0.833).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.15f), std::log(0.1f)};
  SamplingParams p = plain();
  p.top_k = 3;
  p.top_p = 0.8f;
  Sampler s(p, logits.size());
  EXPECT_EQ(ids_of(s.distribution(logits, {})), (std::set<int32_t>{0, 1}));
  // Without top-k, 0.75 < 0.8 and the third token is needed.
  p.top_k = 0;
  Sampler s2(p, logits.size());
  EXPECT_EQ(ids_of(s2.distribution(logits, {})), (std::set<int32_t>{0, 1, 2}));
}

TEST(Sampler, MinPKeepsExactlyTheRightSet) {
  // Probabilities 0.4, 0.3, 0.2, 0.1: min_p * p_max thresholds.
  const std::vector<float> logits = {std::log(0.2f), std::log(0.4f), std::log(0.1f), std::log(0.3f)};
  const std::vector<std::pair<float, std::set<int32_t>>> cases = {{0.1f, {0, 1, 2, 3}},  // threshold 0.04
                                                                  {0.3f, {0, 1, 3}},     // threshold 0.12
                                                                  {0.6f, {1, 3}},        // threshold 0.24
                                                                  {0.8f, {1}},           // threshold 0.32
                                                                  {1.0f, {1}},
                                                                  {5.0f, {1}}};  // beyond 1: still the max
  for (const auto& [min_p, want] : cases) {
    SamplingParams p = plain();
    p.min_p = min_p;
    Sampler s(p, logits.size());
    const Dist d = s.distribution(logits, {});
    EXPECT_EQ(ids_of(d), want) << "min_p = " << min_p;
    double kept = 0.0;
    for (int32_t id : want) kept += std::exp(static_cast<double>(logits[id]));
    for (const auto& [id, prob] : d) {
      EXPECT_NEAR(prob, std::exp(static_cast<double>(logits[id])) / kept, 1e-5);
    }
  }
  // Equal weights are all kept at min_p = 1.
  SamplingParams p = plain();
  p.min_p = 1.0f;
  Sampler s(p, 3);
  EXPECT_EQ(s.distribution(std::vector<float>{1.0f, 1.0f, 0.0f}, {}).size(), 2u);
}

TEST(Sampler, TopPAndMinPTogetherTakeTheShorterPrefix) {
  // 0.4, 0.3, 0.2, 0.1: top_p = 0.85 keeps three, min_p = 0.6 keeps two -> two.
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p = plain();
  p.top_p = 0.85f;
  p.min_p = 0.6f;
  EXPECT_EQ(ids_of(Sampler(p, 4).distribution(logits, {})), (std::set<int32_t>{0, 1}));
  // top_p = 0.5 keeps two, min_p = 0.3 keeps three -> two.
  p.top_p = 0.5f;
  p.min_p = 0.3f;
  EXPECT_EQ(ids_of(Sampler(p, 4).distribution(logits, {})), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, TinyTemperatureEqualsGreedy) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(1000);
  for (float& x : logits) x = normal(gen);
  SamplingParams p;  // default filters on
  p.temperature = 0.0f;
  Sampler greedy(p, logits.size());
  const int32_t want = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(greedy.sample(logits, {}), want);
  const Dist g = greedy.distribution(logits, {});
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].first, want);
  EXPECT_EQ(g[0].second, 1.0f);

  for (float t : {1e-6f, -1.0f, 1e-30f, std::numeric_limits<float>::denorm_min()}) {
    p.temperature = t;
    Sampler s(p, logits.size());
    for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(logits, {}), want) << "T = " << t;
    const Dist d = s.distribution(logits, {});
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].first, want);
    EXPECT_NEAR(d[0].second, 1.0f, 1e-6);
  }
}

TEST(Sampler, GreedyTieTakesLowestId) {
  SamplingParams p = plain();
  p.temperature = 0.0f;
  Sampler s(p, 6);
  EXPECT_EQ(s.sample(std::vector<float>{0.0f, 3.0f, 1.0f, 3.0f, 3.0f, -1.0f}, {}), 1);
  EXPECT_EQ(s.sample(std::vector<float>{5.0f, 5.0f, 5.0f, 5.0f, 5.0f, 5.0f}, {}), 0);
}

TEST(Sampler, NanIsMinusInfinity) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  SamplingParams p = plain();
  p.temperature = 0.0f;
  Sampler greedy(p, 3);
  EXPECT_EQ(greedy.sample(std::vector<float>{nan, -5.0f, nan}, {}), 1);

  Sampler s(plain(), 4);
  expect_matches(s.distribution(std::vector<float>{nan, 1.0f, -inf, 0.0f}, {}), {0.0, 0.7310586, 0.0, 0.2689414});
  // +inf tokens share all the mass; an all-NaN row is uniform rather than a crash.
  expect_matches(s.distribution(std::vector<float>{inf, 1.0f, inf, 0.0f}, {}), {0.5, 0.0, 0.5, 0.0});
  expect_matches(s.distribution(std::vector<float>{nan, nan, nan, nan}, {}), {0.25, 0.25, 0.25, 0.25});
  const int32_t id = s.sample(std::vector<float>{nan, nan, nan, nan}, {});
  EXPECT_TRUE(id >= 0 && id < 4);
}

TEST(Sampler, RepetitionPenaltyHandComputed) {
  SamplingParams p = plain();
  p.repetition_penalty = 2.0f;
  Sampler s(p, 5);
  const std::vector<float> logits = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
  // Tokens 0, 1 and 4 are in the history (0 twice: still penalised once).
  const std::vector<int32_t> history = {0, 1, 0, 4};
  // 2 -> 1, -1 -> -2, 0 stays 0; 0.5 and 3 untouched.
  expect_matches(s.distribution(logits, history), softmax_ref({1.0, -2.0, 0.5, 3.0, 0.0}));
  // Penalty below 1 rewards instead: 2 -> 4, -1 -> -0.5.
  p.repetition_penalty = 0.5f;
  Sampler r(p, 5);
  expect_matches(r.distribution(logits, history), softmax_ref({4.0, -0.5, 0.5, 3.0, 0.0}));
  // Greedy sees the penalised logits: token 0's 3 drops to 0.75, below token 1's 1.
  p.repetition_penalty = 4.0f;
  p.temperature = 0.0f;
  Sampler g(p, 3);
  EXPECT_EQ(g.sample(std::vector<float>{3.0f, 1.0f, 0.0f}, {}), 0);
  EXPECT_EQ(g.sample(std::vector<float>{3.0f, 1.0f, 0.0f}, std::vector<int32_t>{0}), 1);
}

TEST(Sampler, RepeatLastNLimitsTheWindow) {
  SamplingParams p = plain();
  p.repetition_penalty = 2.0f;
  p.repeat_last_n = 2;
  const std::vector<float> logits = {2.0f, 2.0f, 2.0f, 2.0f};
  const std::vector<int32_t> history = {0, 1, 2, 3, 2};
  // Window {3, 2}: only tokens 2 and 3 drop to 1.
  expect_matches(Sampler(p, 4).distribution(logits, history), softmax_ref({2, 2, 1, 1}));
  p.repeat_last_n = 0;  // off
  expect_matches(Sampler(p, 4).distribution(logits, history), softmax_ref({2, 2, 2, 2}));
  p.repeat_last_n = -1;  // whole history
  expect_matches(Sampler(p, 4).distribution(logits, history), softmax_ref({1, 1, 1, 1}));
  p.repeat_last_n = 100;  // longer than the history
  expect_matches(Sampler(p, 4).distribution(logits, history), softmax_ref({1, 1, 1, 1}));
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
  SamplingParams p = plain();
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  const std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  // Counts: token 2 three times, token 0 once, tokens 1 and 3 absent.
  const std::vector<int32_t> history = {2, 0, 2, 2};
  Sampler s(p, 4);
  expect_matches(s.distribution(logits, history), softmax_ref({1.0 - 0.5 - 0.25, 1.0, 1.0 - 0.5 - 0.75, 1.0}));
  // Repeated calls see the same result (the count scratch is reset each time).
  expect_matches(s.distribution(logits, history), softmax_ref({1.0 - 0.5 - 0.25, 1.0, 1.0 - 0.5 - 0.75, 1.0}));
  // Combined with repetition penalty: divide first, then subtract.
  p.repetition_penalty = 2.0f;
  Sampler c(p, 4);
  expect_matches(c.distribution(logits, history), softmax_ref({0.5 - 0.5 - 0.25, 1.0, 0.5 - 0.5 - 0.75, 1.0}));
  // Negative penalties encourage repeats.
  p = plain();
  p.presence_penalty = -1.0f;
  expect_matches(Sampler(p, 4).distribution(logits, history), softmax_ref({2, 1, 2, 1}));
}

TEST(Sampler, BadInputThrows) {
  SamplingParams p = plain();
  p.repetition_penalty = 2.0f;
  Sampler s(p, 4);
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  EXPECT_THROW(s.sample(logits, std::vector<int32_t>{1, 4}), InputError);
  EXPECT_THROW(s.sample(logits, std::vector<int32_t>{-1}), InputError);
  // A failed call leaves the sampler usable and unpolluted.
  expect_matches(s.distribution(logits, std::vector<int32_t>{}), softmax_ref({0, 1, 2, 3}));

  p = plain();
  p.repetition_penalty = 0.0f;
  EXPECT_THROW(Sampler(p, 4), InputError);
  p = plain();
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(Sampler(p, 4), InputError);
  EXPECT_THROW(Sampler(plain(), 0), InputError);
}

std::vector<int32_t> draws(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits, {}));
  return out;
}

TEST(Sampler, SameSeedSameDraws) {
  const std::vector<float> logits = {0.5f, 0.4f, 0.3f, 0.2f, 0.1f, 0.0f, -0.1f, -0.2f};
  SamplingParams p;
  p.seed = 1234;
  Sampler a(p, logits.size());
  Sampler b(p, logits.size());
  const std::vector<int32_t> da = draws(a, logits, 200);
  EXPECT_EQ(da, draws(b, logits, 200));

  p.seed = 1235;
  Sampler c(p, logits.size());
  EXPECT_NE(da, draws(c, logits, 200));

  // Reseeding restarts the stream.
  c.reseed(1234);
  EXPECT_EQ(c.params().seed, 1234u);
  EXPECT_EQ(da, draws(c, logits, 200));
}

TEST(Sampler, EmpiricalFrequenciesMatchDistribution) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -1.0f, 2.0f, 0.2f};
  SamplingParams p = plain();
  p.temperature = 0.9f;
  p.top_k = 5;
  p.seed = 99;
  Sampler s(p, logits.size());
  const Dist d = s.distribution(logits, {});
  constexpr int kDraws = 20000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < kDraws; ++i) ++counts[s.sample(logits, {})];
  std::vector<double> want(logits.size(), 0.0);
  for (const auto& [id, prob] : d) want[id] = prob;
  EXPECT_EQ(counts[3], 0);  // removed by top-k
  for (size_t id = 0; id < logits.size(); ++id) {
    EXPECT_NEAR(static_cast<double>(counts[id]) / kDraws, want[id], 0.01) << "token " << id;
  }
}

TEST(Sampler, ProbabilitiesViewIsTheDistributionSampleDrawsFrom) {
  // The non-allocating view speculative decoding compares equals distribution(), and a draw
  // from it with the sampler's next uniform is the token sample() would have given.
  const std::vector<float> logits = {0.3f, 2.0f, -1.0f, 1.1f, 1.1f, 0.0f, -3.0f};
  const std::vector<int32_t> history = {1, 4, 4};
  SamplingParams p;
  p.top_k = 5;
  p.top_p = 0.9f;
  p.min_p = 0.02f;
  p.repetition_penalty = 1.3f;
  p.seed = 5;
  Sampler viewer(p, logits.size()), plain_sampler(p, logits.size());
  const Dist want = viewer.distribution(logits, history);
  const TokenDistribution got = viewer.probabilities(logits, history);
  ASSERT_EQ(got.ids.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.ids[i], want[i].first);
    EXPECT_EQ(got.probs[i], want[i].second);
    EXPECT_EQ(got.probability_of(want[i].first), want[i].second);
  }
  EXPECT_EQ(got.probability_of(6), 0.0f);  // cut by top-k
  for (int i = 0; i < 200; ++i) {
    const TokenDistribution d = viewer.probabilities(logits, history);
    EXPECT_EQ(Sampler::draw(d, viewer.next_uniform()), plain_sampler.sample(logits, history)) << "draw " << i;
  }
  p.temperature = 0.0f;  // greedy: a point mass on the argmax
  Sampler greedy(p, logits.size());
  const TokenDistribution point = greedy.probabilities(logits, history);
  ASSERT_EQ(point.ids.size(), 1u);
  EXPECT_EQ(point.ids[0], greedy.sample(logits, history));
  EXPECT_EQ(point.probs[0], 1.0f);
}

TEST(Sampler, FullVocabularyRandomLogits) {
  constexpr int64_t kVocab = 128256;
  std::mt19937 gen(42);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(kVocab);
  for (float& x : logits) x = normal(gen);
  std::vector<int32_t> history(500);
  std::uniform_int_distribution<int32_t> token(0, kVocab - 1);
  for (int32_t& t : history) t = token(gen);

  SamplingParams p;  // defaults: T 0.8, top-k 40, top-p 0.95, min-p 0.05
  p.repetition_penalty = 1.1f;
  p.frequency_penalty = 0.1f;
  Sampler s(p, kVocab);
  const Dist d = s.distribution(logits, history);
  ASSERT_FALSE(d.empty());
  EXPECT_LE(d.size(), 40u);
  double sum = 0.0;
  for (const auto& [id, prob] : d) sum += prob;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  const std::set<int32_t> allowed = ids_of(d);
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(allowed.count(s.sample(logits, history)));

  // Filters off: the whole vocabulary against a double reference.
  Sampler all(plain(), kVocab);
  const Dist full = all.distribution(logits, {});
  ASSERT_EQ(full.size(), static_cast<size_t>(kVocab));
  expect_matches(full, softmax_ref(std::vector<double>(logits.begin(), logits.end())), 1e-6);

  // Top-p alone (the full-sort path) on the large vocabulary keeps a sorted prefix.
  SamplingParams tp = plain();
  tp.top_p = 0.5f;
  const Dist half = Sampler(tp, kVocab).distribution(logits, {});
  EXPECT_GT(half.size(), 1u);
  EXPECT_LT(half.size(), static_cast<size_t>(kVocab));
  EXPECT_EQ(half[0].first, full[0].first);
}

TEST(Sampler, LogitBiasIsAddedBeforeSoftmax) {
  SamplingParams p = plain();
  p.logit_bias = {{2, 1.5f}, {0, -0.5f}};
  Sampler s(p, 4);
  const std::vector<float> logits = {0.3f, -1.2f, 2.5f, 0.0f};
  expect_matches(s.distribution(logits, {}), softmax_ref({-0.2f, -1.2f, 4.0f, 0.0f}, 1.0));
  SamplingParams greedy = plain();
  greedy.temperature = 0.0f;
  greedy.logit_bias = {{1, 100.0f}};  // OpenAI's +100: all but forces the token
  Sampler forced(greedy, 4);
  EXPECT_EQ(forced.sample(logits, {}), 1);
  greedy.logit_bias = {{2, -100.0f}};  // -100: all but bans it
  Sampler banned(greedy, 4);
  EXPECT_EQ(banned.sample(logits, {}), 0);
}

TEST(Sampler, LogitBiasOutsideTheVocabularyIsAnInputError) {
  SamplingParams p = plain();
  p.logit_bias = {{4, 1.0f}};
  EXPECT_THROW(Sampler(p, 4), InputError);
  p.logit_bias = {{1, std::numeric_limits<float>::infinity()}};
  EXPECT_THROW(Sampler(p, 4), InputError);
}

TEST(Sampler, SuppressedTokensAreNeverPickedUntilReleased) {
  SamplingParams p = plain();
  p.temperature = 0.0f;
  Sampler s(p, 4);
  const std::vector<float> logits = {0.3f, -1.2f, 2.5f, 0.0f};
  const std::vector<int32_t> suppressed = {2, 0, 99};  // 99: outside, ignored
  s.set_suppressed(suppressed);
  EXPECT_EQ(s.sample(logits, {}), 3);
  const TokenDistribution d = s.probabilities(logits, {});
  EXPECT_EQ(d.probability_of(2), 0.0f);
  s.set_suppressed({});
  EXPECT_EQ(s.sample(logits, {}), 2);
  SamplingParams hot = plain();
  Sampler sampled(hot, 4);
  sampled.set_suppressed(suppressed);
  for (const auto& [id, prob] : sampled.distribution(logits, {})) EXPECT_TRUE(id == 1 || id == 3 || prob == 0.0f) << id;
}

}  // namespace
}  // namespace tandem
