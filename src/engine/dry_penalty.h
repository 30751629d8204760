// DRY ("don't repeat yourself"), llama.cpp's repetition sampler: a token that would extend a
// sequence already seen in the context is penalised by multiplier * base^(n - allowed_length),
// n the length of the repeat it would extend, where n >= allowed_length. A repeat never
// reaches back past a sequence breaker (by default "\n", ":", "\"", "*"). This file owns the
// penalty on one logits row and turning breaker strings into token sequences; the Sampler
// calls it among the penalties, before temperature. No RNG, no state between calls.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tandem {

class Tokenizer;

struct DryParams {
  float multiplier = 0.0f;      // 0: off
  float base = 1.75f;           // >= 1
  int32_t allowed_length = 2;   // repeats shorter than this are free
  int32_t penalty_last_n = -1;  // how many of the last tokens are searched; -1: the whole history; 0: off
  // Breakers as token sequences {head, tail...}, sorted (dry_breaker_sequences()): a breaker
  // occurs where its head is followed by its tail.
  std::vector<std::vector<int32_t>> breakers{};

  bool enabled() const { return multiplier != 0.0f && base >= 1.0f && penalty_last_n != 0; }
};

// llama-server's default breakers.
std::vector<std::string> default_dry_breakers();

// The breakers' token sequences as llama.cpp derives them: every token whose text contains a
// breaker is one on its own; a token whose text ends with a proper prefix of a breaker heads a
// sequence whose tail is the rest of the breaker as the tokenizer encodes it (at most
// kMaxDryTail tokens). Scans the vocabulary once. InputError for an empty breaker or one longer
// than kMaxDryBreakerBytes.
constexpr size_t kMaxDryBreakerBytes = 40;
constexpr size_t kMaxDryTail = 20;
std::vector<std::vector<int32_t>> dry_breaker_sequences(const Tokenizer& tokenizer,
                                                        std::span<const std::string> breakers);

// Scratch for apply_dry, kept by the Sampler so that a step allocates nothing once it has seen
// its longest window.
struct DryScratch {
  std::vector<int32_t> reversed;  // the window, newest first
  std::vector<int32_t> z;         // Z-array of `reversed`
  std::vector<int32_t> longest;   // [vocab_size] longest repeat each token would extend; all 0 between calls
  std::vector<int32_t> touched;   // tokens with longest > 0
};

// Subtracts each token's DRY penalty from logits [vocab_size]. history: the tokens so far
// (prompt and generated); ids must be inside the vocabulary (the caller checked). O(window):
// every earlier match of the window's suffix from one Z-array.
void apply_dry(const DryParams& params, std::span<const int32_t> history, std::span<float> logits, DryScratch& scratch);

// The same penalties by direct comparison, O(window^2): the reference apply_dry is tested
// against.
void apply_dry_reference(const DryParams& params, std::span<const int32_t> history, std::span<float> logits);

}  // namespace tandem
