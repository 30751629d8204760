// RejectionSampler: speculative sampling's accept / resample rule keeps the target
// distribution exactly. Checked statistically (chi-square over many draws of a draft from q,
// the verdicts' tokens against p) on small vocabularies, with p and q the Sampler's own
// post-processed distributions (temperature, top-k, top-p, penalties); the same test rejects
// the draft's distribution, so it can fail. Also the closed forms: the acceptance rate is
// sum min(p, q), and a point-mass q keeps x with probability p(x).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/sampler.h"
#include "engine/speculation/rejection_sampler.h"

namespace tandem {
namespace {

// A copy of a TokenDistribution (the Sampler's view is overwritten by its next call).
struct OwnedDistribution {
  std::vector<int32_t> ids;
  std::vector<float> probs;
  explicit OwnedDistribution(TokenDistribution d)
      : ids(d.ids.begin(), d.ids.end()), probs(d.probs.begin(), d.probs.end()) {}
  TokenDistribution view() const { return {ids, probs}; }
  double at(int32_t token) const { return view().probability_of(token); }
};

std::vector<float> random_logits(std::mt19937_64& rng, int64_t vocab) {
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (float& x : logits) x = normal(rng);
  return logits;
}

// Pearson's chi-square of observed counts against expected probabilities; cells with zero
// expectation must be empty (any hit there is an impossible token: infinite statistic).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& expected, int64_t n) {
  double chi = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * static_cast<double>(n);
    if (e == 0.0) {
      if (counts[i] > 0) return INFINITY;
      continue;
    }
    chi += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return chi;
}

struct Case {
  SamplingParams target, draft;
  int64_t vocab;
};

TEST(RejectionSampler, KeepsTheTargetDistributionExactly) {
  std::mt19937_64 rng(2024);
  std::vector<Case> cases;
  for (int64_t vocab : {5, 9, 16}) {
    Case c;
    c.vocab = vocab;
    c.target.temperature = 0.9f;
    c.target.top_k = static_cast<int32_t>(vocab - 1);  // one token the target can never emit
    c.target.top_p = 0.97f;
    c.target.min_p = 0.0f;
    c.draft.temperature = 1.4f;  // a flatter, wrong draft that proposes everything
    c.draft.top_k = 0;
    c.draft.top_p = 1.0f;
    c.draft.min_p = 0.0f;
    cases.push_back(c);
  }
  constexpr int64_t kDraws = 200000;
  for (const Case& c : cases) {
    Sampler target(c.target, c.vocab), draft(c.draft, c.vocab), coins(c.draft, c.vocab);
    const OwnedDistribution p(target.probabilities(random_logits(rng, c.vocab), {}));
    const OwnedDistribution q(draft.probabilities(random_logits(rng, c.vocab), {}));
    RejectionSampler rule(c.vocab);
    std::vector<int64_t> out(static_cast<size_t>(c.vocab), 0), proposed(static_cast<size_t>(c.vocab), 0);
    int64_t accepted = 0;
    for (int64_t i = 0; i < kDraws; ++i) {
      const int32_t x = Sampler::draw(q.view(), coins.next_uniform());
      ++proposed[static_cast<size_t>(x)];
      const SpeculativeVerdict verdict = rule.verify(p.view(), q.view(), x, coins.next_uniform(), coins.next_uniform());
      ++out[static_cast<size_t>(verdict.token)];
      if (verdict.accepted) {
        EXPECT_EQ(verdict.token, x);
        ++accepted;
      }
    }
    std::vector<double> want_p(static_cast<size_t>(c.vocab)), want_q(static_cast<size_t>(c.vocab));
    double overlap = 0.0;
    int64_t support = 0;
    for (int32_t t = 0; t < c.vocab; ++t) {
      want_p[static_cast<size_t>(t)] = p.at(t);
      want_q[static_cast<size_t>(t)] = q.at(t);
      overlap += std::min(p.at(t), q.at(t));
      support += p.at(t) > 0.0 ? 1 : 0;
    }
    // df = support - 1 <= 15; 50 is far past the 1e-6 tail of chi-square(15) (about 48).
    EXPECT_LT(chi_square(out, want_p, kDraws), 50.0) << "vocab " << c.vocab;
    // The same statistic must reject what the draft proposed (it is a different distribution).
    EXPECT_GT(chi_square(proposed, want_p, kDraws), 1000.0) << "vocab " << c.vocab;
    // P(accept) = sum_x q(x) min(1, p(x)/q(x)) = sum min(p, q).
    EXPECT_NEAR(static_cast<double>(accepted) / kDraws, overlap, 0.005) << "vocab " << c.vocab;
    EXPECT_GE(support, 2);
  }
}

TEST(RejectionSampler, PointMassDraftKeepsXWithProbabilityPx) {
  // A deterministic proposer (prompt lookup) is q = a point mass on x: keep x with
  // probability p(x), otherwise draw from p without x. Exact thresholds, then statistics.
  const std::vector<int32_t> p_ids = {2, 0, 3};
  const std::vector<float> p_probs = {0.5f, 0.3f, 0.2f};
  const TokenDistribution p{p_ids, p_probs};
  const std::vector<int32_t> q_ids = {0};
  const std::vector<float> q_probs = {1.0f};
  const TokenDistribution q{q_ids, q_probs};
  RejectionSampler rule(4);
  EXPECT_TRUE(rule.verify(p, q, 0, 0.29, 0.0).accepted);
  EXPECT_FALSE(rule.verify(p, q, 0, 0.31, 0.0).accepted);
  // Rejected: the residual is p without token 0, i.e. {2: 0.5, 3: 0.2} / 0.7.
  EXPECT_EQ(rule.verify(p, q, 0, 0.9, 0.70).token, 2);
  EXPECT_EQ(rule.verify(p, q, 0, 0.9, 0.72).token, 3);
  // A proposal the target cannot emit is always rejected.
  const std::vector<int32_t> q1_ids = {1};
  const TokenDistribution q1{q1_ids, q_probs};
  EXPECT_FALSE(rule.verify(p, q1, 1, 0.0, 0.1).accepted);

  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<int64_t> counts(4, 0);
  constexpr int64_t kDraws = 100000;
  for (int64_t i = 0; i < kDraws; ++i)
    ++counts[static_cast<size_t>(rule.verify(p, q, 0, uniform(rng), uniform(rng)).token)];
  EXPECT_LT(chi_square(counts, {0.3, 0.0, 0.5, 0.2}, kDraws), 30.0);
}

}  // namespace
}  // namespace tandem
