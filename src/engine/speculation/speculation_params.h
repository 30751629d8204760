// SpeculationParams: how one request speculates — which proposer, how many tokens it may
// propose per step, and the proposer's own options. Plain data with its input check; the
// proposers, the adaptive draft length and the engine's verification live beside it.
#pragma once

#include <cstdint>
#include <string_view>

namespace tandem {

enum class SpeculationType {
  None,   // plain decoding: one token per step
  Ngram,  // prompt lookup: propose what followed the latest earlier match of the newest n-gram
  Draft,  // a smaller draft model (the engine's, EngineConfig::draft_model) proposes
};

// The most tokens one step may propose per sequence: bounds a step's extra rows and the draft
// model's per-sequence buffers of q ([kMaxDraftTokens, vocab_size]).
inline constexpr int32_t kMaxDraftTokens = 16;

struct SpeculationParams {
  SpeculationType type = SpeculationType::None;
  int32_t draft_max = 4;  // tokens proposed per step at most (the adaptive length's ceiling)
  int32_t draft_min = 0;  // the adaptive length's floor; 0 lets it stop proposing (and probe)
  int32_t ngram_min = 2;  // n-gram sizes matched, the longest first
  int32_t ngram_max = 4;

  bool enabled() const { return type != SpeculationType::None && draft_max > 0; }
};

// Throws InputError for draft_min > draft_max, lengths outside 0..kMaxDraftTokens, or (prompt
// lookup) n-gram sizes outside 1..16; nothing is checked of a request that does not speculate.
void check_speculation(const SpeculationParams& params);
// "none" | "ngram" | "draft"; throws InputError for any other name.
SpeculationType speculation_type_from_name(std::string_view name);
const char* speculation_type_name(SpeculationType type);

}  // namespace tandem
