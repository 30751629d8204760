// generate(): the prefill-then-decode loop for one sequence (see generation.h).
#include "engine/generation.h"

#include <chrono>

#include "base/error.h"

namespace tandem {

std::string_view stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::EndOfSequence: return "end of sequence";
    case StopReason::TokenLimit: return "token limit";
    case StopReason::ContextLimit: return "context limit";
  }
  return "?";
}

namespace {
using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}
}  // namespace

GenerationResult generate(Forward& forward, KvCache& cache, Sampler& sampler, std::span<const int32_t> prompt,
                          int64_t max_new_tokens, int32_t eos_id, int32_t seq,
                          const std::function<void(int32_t)>& on_token) {
  const int64_t context = forward.model().config.context_length;
  const auto n_prompt = static_cast<int64_t>(prompt.size());
  TANDEM_CHECK_INPUT(n_prompt > 0, "the prompt is empty (no tokens)");
  TANDEM_CHECK_INPUT(n_prompt <= context, "the prompt has {} tokens but the model's context is {}", n_prompt, context);
  TANDEM_CHECK_INPUT(n_prompt <= forward.max_batch_tokens(), "the prompt has {} tokens, more than the batch limit {}",
                     n_prompt, forward.max_batch_tokens());
  TANDEM_CHECK_INPUT(cache.reserve(seq, n_prompt), "the KV cache cannot hold the {}-token prompt", n_prompt);

  GenerationResult result;
  result.tokens.assign(prompt.begin(), prompt.end());
  GenerationTimings& timings = result.timings;
  timings.prompt_tokens = n_prompt;

  const Clock::time_point start = Clock::now();
  Batch batch;
  for (int64_t i = 0; i < n_prompt; ++i)
    batch.add(prompt[static_cast<size_t>(i)], static_cast<int32_t>(i), seq, i == n_prompt - 1);
  std::span<const float> logits = forward.run(batch, cache);
  timings.prefill_ms = ms_since(start);

  result.stop_reason = StopReason::TokenLimit;
  for (int64_t generated = 0; generated < max_new_tokens; ++generated) {
    const Clock::time_point step_start = Clock::now();
    if (generated > 0) {
      // Feed back the token just chosen: it sits at position tokens.size() - 1.
      const auto position = static_cast<int32_t>(result.tokens.size() - 1);
      TANDEM_ASSERT(cache.reserve(seq, position + 1));
      batch.clear();
      batch.add(result.tokens.back(), position, seq, true);
      logits = forward.run(batch, cache);
    }
    const int32_t next = sampler.sample(logits, result.tokens);
    result.tokens.push_back(next);
    ++timings.generated_tokens;
    if (generated == 0) {
      timings.ttft_ms = ms_since(start);
    } else {
      timings.step_ms.push_back(ms_since(step_start));
      timings.decode_ms += timings.step_ms.back();
    }
    if (on_token) on_token(next);
    if (next == eos_id) {
      result.stop_reason = StopReason::EndOfSequence;
      break;
    }
    // The newest token would sit at position tokens.size() - 1; past the context it cannot be fed.
    if (static_cast<int64_t>(result.tokens.size()) > context) {
      result.stop_reason = generated + 1 < max_new_tokens ? StopReason::ContextLimit : StopReason::TokenLimit;
      break;
    }
  }
  timings.kv_bytes_in_use = cache.bytes_in_use();
  return result;
}

}  // namespace tandem
