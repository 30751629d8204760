// Sampler: turns one row of logits into the next token id for one sequence. It owns the
// sampling chain (logit bias, penalties, DRY, suppressed tokens; temperature, softmax; top-k,
// typical-p, top-p, min-p, XTC; the draw), its scratch and its seeded RNG. It knows nothing
// about batches, requests or the tokenizer; one Sampler per sequence, so draws are
// reproducible per request whatever else is in the batch.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/dry_penalty.h"

namespace tandem {

// A distribution over a few tokens as parallel spans (ids[i] has probability probs[i]), most
// probable first; a view into a Sampler's scratch, valid until its next call.
struct TokenDistribution {
  std::span<const int32_t> ids;
  std::span<const float> probs;

  // Probability of `token`; 0 when it is not among the ids (a linear scan: the spans are short).
  float probability_of(int32_t token) const;
};

struct SamplingParams {
  float temperature = 0.8f;  // <= 0: greedy (argmax; ties -> lowest id)
  int32_t top_k = 40;        // <= 0 or >= vocab_size: off
  float top_p = 0.95f;       // >= 1: off; <= 0 keeps only the most probable token
  float min_p = 0.05f;       // <= 0: off; keep tokens with p >= min_p * p_max
  // 1: off. Logits of tokens seen in the history window: positive / penalty, negative * penalty.
  float repetition_penalty = 1.0f;
  // History window the penalties look at: the last repeat_last_n tokens; 0: no penalties;
  // < 0: the whole history.
  int32_t repeat_last_n = 64;
  float presence_penalty = 0.0f;   // subtracted once from each token present in the window
  float frequency_penalty = 0.0f;  // subtracted count-in-window times
  uint64_t seed = 0;
  // OpenAI's logit_bias: (token, bias) pairs added to the logits before the penalties;
  // -100 all but bans a token, +100 all but forces it. Ids must be inside the vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias{};
  // vLLM's allowed_token_ids: when not empty, no other token can be sampled (their logits
  // become -inf with the suppressed tokens). Ids must be inside the vocabulary.
  std::vector<int32_t> allowed_tokens{};
  // Locally typical sampling (Meister et al.; llama.cpp's typical_p): after top-k, keep the
  // tokens whose surprise -log p is closest to the entropy, as few as reach this much mass.
  // >= 1: off.
  float typical_p = 1.0f;
  // XTC (llama.cpp's "exclude top choices"): with this probability per step, every token
  // with p >= xtc_threshold but the least probable of them is removed (after min-p; nothing
  // happens with fewer than two such tokens or a threshold above 0.5). 0: off. When on, each
  // distribution draws one uniform from the seeded stream before the token's.
  float xtc_probability = 0.0f;
  float xtc_threshold = 0.1f;
  // DRY repetition penalty (dry_penalty.h), applied after the other penalties.
  DryParams dry{};
  // Mirostat (llama.cpp's; Basu et al.): 1 or 2 replaces top-k, typical-p, top-p, min-p and
  // XTC (which must then be off) with a truncation steered towards a target surprise: v1 keeps
  // the k most probable tokens, k estimated from a Zipf fit of the top 100 and mu; v2 keeps the
  // tokens whose surprise -log2 p is at most mu. After each sample() mu moves by
  // eta * (tau - the token's surprise); it starts at 2 tau. 0: off.
  int32_t mirostat = 0;
  float mirostat_tau = 5.0f;
  float mirostat_eta = 0.1f;
};

class Sampler {
 public:
  // Allocates all scratch for vocab_size here, so sample() never allocates.
  // Throws InputError for unusable params (NaN values, repetition_penalty <= 0).
  Sampler(SamplingParams params, int64_t vocab_size);

  // Picks the next token from logits [vocab_size] given the sequence so far (token ids,
  // prompt included; only the last repeat_last_n matter). NaN logits count as -inf.
  // Throws InputError for a history id outside [0, vocab_size).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // The distribution sample() draws from (after penalties, temperature, top-k, typical-p,
  // top-p, min-p, XTC, renormalise) as (token, probability) pairs, most probable first, ties by lower
  // id. Greedy gives one pair with probability 1. Allocates: for tests and logprobs.
  std::vector<std::pair<int32_t, float>> distribution(std::span<const float> logits, std::span<const int32_t> history);

  // The same distribution without allocating: a view into this sampler's scratch, valid until
  // its next call. Speculative decoding compares target and draft distributions through it.
  TokenDistribution probabilities(std::span<const float> logits, std::span<const int32_t> history);
  // A token from `distribution` by the uniform `u` in [0, 1): the same inverse-CDF walk
  // sample() does.
  static int32_t draw(TokenDistribution distribution, double u);
  // The next uniform double in [0, 1) of this sampler's seeded stream (one per sample()
  // outside greedy); the rejection rule of speculative sampling draws its coins here.
  double next_uniform();

  void reseed(uint64_t seed);
  // Tokens no call may pick until the next set_suppressed (their logits become -inf after the
  // penalties): the engine bans end-of-sequence tokens before a request's min_tokens. Ids
  // outside the vocabulary are ignored. Allocates only when the list outgrows earlier ones.
  void set_suppressed(std::span<const int32_t> ids);
  const SamplingParams& params() const { return params_; }
  float mirostat_mu() const { return mirostat_mu_; }
  int64_t vocab_size() const { return vocab_size_; }

 private:
  // Applies NaN -> -inf, logit_bias, the penalties and the suppressed tokens into work_ [vocab_size].
  void penalise(std::span<const float> logits, std::span<const int32_t> history);
  void apply_penalties(std::span<const int32_t> history);  // penalise's repetition/presence/frequency step
  // Greedy pick over work_: argmax, ties -> lowest id.
  int32_t argmax() const;
  // Fills ids_[0, n) / probs_[0, n) with the final distribution, sorted; returns n >= 1.
  int64_t build_distribution();
  // Typical-p over the n candidates ids_[0, n) with weights work_: moves the kept ones to the
  // front and returns how many they are.
  int64_t typical_filter(int64_t n);
  // Mirostat's truncation of the n candidates ids_[0, n) (weights in work_): sorts the kept
  // ones to the front and returns how many.
  int64_t mirostat_filter(int64_t n);
  // XTC over the sorted, kept candidates ids_[0, n) (mass: their weights' sum): returns the
  // index of the first one kept (0: none removed).
  int64_t xtc_cut(int64_t n, double mass);
  SamplingParams params_;
  int64_t vocab_size_;
  std::mt19937_64 rng_;
  std::vector<float> work_;          // [vocab_size] penalised logits, then exp weights
  std::vector<int32_t> ids_;         // [vocab_size] candidate token ids
  std::vector<float> probs_;         // [vocab_size] final probabilities, parallel to ids_
  std::vector<int32_t> counts_;      // [vocab_size] occurrences in the window; all zero between calls
  std::vector<int32_t> suppressed_;  // set_suppressed's ids
  std::vector<float> typical_keys_;  // [vocab_size] |surprise - entropy| when typical_p < 1
  std::vector<uint8_t> allowed_;     // [vocab_size] 1: may be sampled; empty: every token may
  float mirostat_mu_ = 0.0f;         // Mirostat's running surprise bound
  DryScratch dry_;
};

}  // namespace tandem
