// Single-sequence generation: prefill the prompt in one forward call, then decode one token
// per call until EOS, the token limit or the context limit. Reports every token as it is
// chosen and keeps the timings that `tandem run` prints (TTFT, TPOT percentiles, ...).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "kv/kv_cache.h"
#include "model/forward.h"

namespace tandem {

enum class StopReason { EndOfSequence, TokenLimit, ContextLimit };
std::string_view stop_reason_name(StopReason reason);

struct GenerationTimings {
  int64_t prompt_tokens = 0;
  double prefill_ms = 0.0;           // the prompt's forward pass (incl. its logits)
  double ttft_ms = 0.0;              // start -> first generated token chosen
  int64_t generated_tokens = 0;
  double decode_ms = 0.0;            // all decode steps (tokens after the first)
  std::vector<double> step_ms;       // per decode step: forward + sampling
  int64_t kv_bytes_in_use = 0;       // at the end
};

struct GenerationResult {
  std::vector<int32_t> tokens;  // the prompt (as given, BOS included if it was) + generated
  StopReason stop_reason = StopReason::TokenLimit;
  GenerationTimings timings;
};

// Prefills `prompt` into sequence `seq` of an empty cache region and generates up to
// max_new_tokens. `on_token` sees each generated token (EOS included) as soon as it is chosen.
// Throws InputError when the prompt is empty or does not fit the context.
GenerationResult generate(Forward& forward, KvCache& cache, Sampler& sampler, std::span<const int32_t> prompt,
                          int64_t max_new_tokens, int32_t eos_id, int32_t seq,
                          const std::function<void(int32_t)>& on_token);

}  // namespace tandem
