// Tests for the samplers added for issue 35 (typical-p, XTC, DRY) and their place in the
// chain: the Sampler against the plain double-precision chain (sampler_reference.h) on random
// logits, histories and parameters; DRY's Z-array against its direct reference; hand-computed
// cases; seeded draws with XTC reproducible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/dry_penalty.h"
#include "engine/sampler.h"
#include "engine/sampler_reference.h"

namespace tandem {
namespace {

SamplingParams plain() {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

// The first uniform a Sampler seeded with `seed` draws (Sampler::next_uniform's recipe).
double first_uniform(uint64_t seed) {
  std::mt19937_64 rng(seed);
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

std::vector<int32_t> random_history(std::mt19937& gen, int32_t alphabet, size_t length) {
  std::uniform_int_distribution<int32_t> token(0, alphabet - 1);
  std::vector<int32_t> h(length);
  for (int32_t& t : h) t = token(gen);
  return h;
}

TEST(SamplerExtras, RandomChainsMatchTheReference) {
  std::mt19937 gen(35);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  int with_typical = 0, with_xtc_cut = 0, with_dry = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const auto vocab = std::uniform_int_distribution<int32_t>(8, 300)(gen);
    std::normal_distribution<float> normal(0.0f, 0.5f + 3.0f * unit(gen));
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& x : logits) x = normal(gen);
    // A small alphabet makes repeats, which DRY and the penalties need.
    const std::vector<int32_t> history = random_history(gen, std::min<int32_t>(vocab, 2 + trial % 6),
                                                        std::uniform_int_distribution<size_t>(0, 200)(gen));

    SamplingParams p = plain();
    p.seed = static_cast<uint64_t>(trial) * 7919u;
    p.temperature = 0.3f + 1.2f * unit(gen);
    if (trial % 3 == 0) p.top_k = std::uniform_int_distribution<int32_t>(1, vocab)(gen);
    if (trial % 2 == 0) p.typical_p = 0.2f + 0.79f * unit(gen);
    if (trial % 4 == 1) p.top_p = 0.3f + 0.69f * unit(gen);
    if (trial % 5 == 2) p.min_p = 0.3f * unit(gen);
    if (trial % 3 == 1) {
      p.repetition_penalty = 1.0f + unit(gen);
      p.frequency_penalty = 0.2f * unit(gen);
      p.repeat_last_n = trial % 2 == 0 ? -1 : 16;
    }
    if (trial % 2 == 1) {
      p.dry.multiplier = 0.1f + 2.0f * unit(gen);
      p.dry.base = 1.0f + 2.0f * unit(gen);
      p.dry.allowed_length = std::uniform_int_distribution<int32_t>(1, 4)(gen);
      p.dry.penalty_last_n = trial % 4 == 1 ? -1 : 64;
      if (trial % 8 == 3) p.dry.breakers = {{0}, {1, 2}};
      ++with_dry;
    }
    if (trial % 7 == 3) {  // allowed_token_ids: a random third of the vocabulary
      for (int32_t t = 0; t < vocab; ++t)
        if (unit(gen) < 0.33f) p.allowed_tokens.push_back(t);
      if (p.allowed_tokens.empty()) p.allowed_tokens.push_back(vocab - 1);
    }
    if (trial % 3 == 2) {
      p.xtc_probability = unit(gen);
      p.xtc_threshold = 0.05f + 0.3f * unit(gen);
    }
    Sampler sampler(p, vocab);
    const auto got = sampler.distribution(logits, history);
    const auto want = reference_distribution(p, logits, history, {}, first_uniform(p.seed));
    ASSERT_EQ(got.size(), want.size()) << "trial " << trial;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].first, want[i].first) << "trial " << trial << " rank " << i;
      EXPECT_NEAR(got[i].second, want[i].second, 2e-5) << "trial " << trial << " rank " << i;
    }
    with_typical += p.typical_p < 1.0f && got.size() < static_cast<size_t>(vocab);
    with_xtc_cut += p.xtc_probability > 0.0f && first_uniform(p.seed) < p.xtc_probability;
    for (const auto& [id, prob] : got) {
      if (!p.allowed_tokens.empty()) {
        EXPECT_NE(std::find(p.allowed_tokens.begin(), p.allowed_tokens.end(), id), p.allowed_tokens.end()) << id;
      }
    }
  }
  // The trials exercised each stage.
  EXPECT_GT(with_typical, 50);
  EXPECT_GT(with_xtc_cut, 20);
  EXPECT_GT(with_dry, 100);
}

TEST(SamplerExtras, DryZArrayMatchesTheDirectReference) {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 500; ++trial) {
    const int32_t vocab = 12;
    DryParams p;
    p.multiplier = 0.8f;
    p.base = 1.75f;
    p.allowed_length = 1 + trial % 3;
    p.penalty_last_n = trial % 5 == 0 ? 32 : -1;
    if (trial % 3 == 0) p.breakers = {{3}, {4, 5}, {4, 5, 6}};
    const std::vector<int32_t> history = random_history(gen, 2 + trial % 10, static_cast<size_t>(trial % 120));
    std::vector<float> fast(vocab, 0.5f), reference(vocab, 0.5f);
    DryScratch scratch;
    apply_dry(p, history, fast, scratch);
    apply_dry_reference(p, history, reference);
    for (int32_t t = 0; t < vocab; ++t) EXPECT_EQ(fast[t], reference[t]) << "trial " << trial << " token " << t;
  }
}

TEST(SamplerExtras, DryHandComputed) {
  DryParams p;
  p.multiplier = 1.0f;
  p.base = 2.0f;
  p.allowed_length = 2;
  DryScratch scratch;
  // 1 2 3 1 2: another 3 would extend the repeat "1 2" (length 2): 1 * 2^0.
  std::vector<float> logits(5, 0.0f);
  apply_dry(p, std::vector<int32_t>{1, 2, 3, 1, 2}, logits, scratch);
  EXPECT_EQ(logits, (std::vector<float>{0, 0, 0, -1, 0}));
  // 1 2 3 4 1 2 3: another 4 extends "1 2 3" (length 3): 2^1.
  logits.assign(5, 0.0f);
  apply_dry(p, std::vector<int32_t>{1, 2, 3, 4, 1, 2, 3}, logits, scratch);
  EXPECT_EQ(logits, (std::vector<float>{0, 0, 0, 0, -2}));
  // A breaker among the last tokens limits the repeat: with 2 a breaker, nothing after the
  // newest 2 is long enough.
  p.breakers = {{2}};
  logits.assign(5, 0.0f);
  apply_dry(p, std::vector<int32_t>{1, 2, 3, 1, 2}, logits, scratch);
  EXPECT_EQ(logits, (std::vector<float>(5, 0.0f)));
  // A two-token breaker (3 then 4) counts only as the pair.
  p.breakers = {{3, 4}};
  logits.assign(5, 0.0f);
  apply_dry(p, std::vector<int32_t>{1, 2, 3, 4, 1, 2, 3}, logits, scratch);
  EXPECT_EQ(logits, (std::vector<float>{0, 0, 0, 0, -2}));
  logits.assign(5, 0.0f);
  apply_dry(p, std::vector<int32_t>{3, 4, 1, 2, 0, 1, 2}, logits, scratch);  // limit 5: "1 2" then 0
  EXPECT_EQ(logits, (std::vector<float>{-1, 0, 0, 0, 0}));
  // Multiplier 0 or penalty_last_n 0: off.
  p.penalty_last_n = 0;
  logits.assign(5, 0.0f);
  apply_dry(p, std::vector<int32_t>{1, 2, 3, 1, 2}, logits, scratch);
  EXPECT_EQ(logits, (std::vector<float>(5, 0.0f)));
}

TEST(SamplerExtras, XtcRemovesTheTopChoicesButTheLeastProbable) {
  SamplingParams p = plain();
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.25f;
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  const auto d = Sampler(p, 4).distribution(logits, {});
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].first, 1);
  EXPECT_NEAR(d[0].second, 0.5, 1e-6);
  EXPECT_EQ(d[2].first, 3);
  // Threshold above 0.5: off.
  p.xtc_threshold = 0.6f;
  EXPECT_EQ(Sampler(p, 4).distribution(logits, {}).size(), 4u);
}

TEST(SamplerExtras, TypicalKeepsTokensNearTheEntropy) {
  // One dominant token (p 0.7) and nine at 1/30: entropy 1.27 nats; the dominant token's
  // surprise 0.36 is closer to it (0.91) than the others' 3.40 (2.13), so typical_p 0.5 keeps
  // it alone.
  std::vector<float> logits(10, std::log(1.0f / 30.0f));
  logits[4] = std::log(0.7f);
  SamplingParams p = plain();
  p.typical_p = 0.5f;
  const auto d = Sampler(p, 10).distribution(logits, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].first, 4);
  p.typical_p = 0.75f;  // then the nine come in id order (equal keys, equal weights)
  EXPECT_EQ(Sampler(p, 10).distribution(logits, {}).size(), 3u);
}

// Mirostat v1 and v2: each step's distribution is the reference's at the sampler's mu, and mu
// moves by eta times the drawn token's surprise less tau.
TEST(SamplerExtras, MirostatMatchesTheReferenceAndStepsMu) {
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  int truncated = 0;
  for (int trial = 0; trial < 80; ++trial) {
    const auto vocab = std::uniform_int_distribution<int32_t>(2, 300)(gen);
    std::normal_distribution<float> normal(0.0f, 0.5f + 4.0f * unit(gen));
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (float& x : logits) x = normal(gen);
    SamplingParams p = plain();
    p.seed = static_cast<uint64_t>(trial);
    p.temperature = 0.5f + unit(gen);
    p.mirostat = 1 + trial % 2;
    p.mirostat_tau = 0.5f + 6.0f * unit(gen);
    p.mirostat_eta = 0.05f + 0.5f * unit(gen);
    Sampler sampler(p, vocab);
    EXPECT_FLOAT_EQ(sampler.mirostat_mu(), 2.0f * p.mirostat_tau);
    std::vector<int32_t> history;
    for (int step = 0; step < 8; ++step) {
      SCOPED_TRACE("trial " + std::to_string(trial) + " step " + std::to_string(step));
      const double mu = sampler.mirostat_mu();
      const auto want = reference_distribution(p, logits, history, {}, 0.0, mu);
      const auto got = sampler.distribution(logits, history);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].first, want[i].first) << "rank " << i;
        EXPECT_NEAR(got[i].second, want[i].second, 2e-5) << "rank " << i;
      }
      truncated += want.size() < static_cast<size_t>(vocab);
      const int32_t token = sampler.sample(logits, history);
      double p_token = 0.0;
      for (const auto& [id, prob] : want)
        if (id == token) p_token = prob;
      ASSERT_GT(p_token, 0.0) << "drew a token outside the distribution";
      EXPECT_NEAR(sampler.mirostat_mu(), mu - p.mirostat_eta * (-std::log2(p_token) - p.mirostat_tau), 1e-3);
      history.push_back(token);
    }
  }
  EXPECT_GT(truncated, 200);  // the truncation did cut, most of the time
  // Mirostat replaces the truncation filters: with one of them on it is refused.
  SamplingParams both = plain();
  both.mirostat = 2;
  both.top_k = 5;
  EXPECT_THROW(Sampler(both, 10), InputError);
}

TEST(SamplerExtras, SeededDrawsWithEveryStageAreReproducible) {
  SamplingParams p = plain();
  p.seed = 1234;
  p.typical_p = 0.9f;
  p.xtc_probability = 0.5f;
  p.xtc_threshold = 0.05f;
  p.dry.multiplier = 0.8f;
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(64);
  for (float& x : logits) x = normal(gen);
  Sampler a(p, 64), b(p, 64);
  std::vector<int32_t> history_a, history_b;
  for (int i = 0; i < 200; ++i) {
    history_a.push_back(a.sample(logits, history_a));
    history_b.push_back(b.sample(logits, history_b));
  }
  EXPECT_EQ(history_a, history_b);
  EXPECT_GT(std::set<int32_t>(history_a.begin(), history_a.end()).size(), 1u);
}

}  // namespace
}  // namespace tandem
