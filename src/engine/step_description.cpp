// describe_step(): see step_description.h.
#include "engine/step_description.h"

#include <algorithm>

#include <fmt/format.h>

namespace tandem {

std::string describe_step(const StepPlan& plan, int64_t step_index) {
  std::string admissions, prefills, preemptions;
  int64_t decodes = 0, decode_tokens = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Request& request = *chunk.request;
    const bool prefill = chunk.start < static_cast<int64_t>(request.prompt.size());
    if (!prefill) {
      ++decodes;
      decode_tokens += chunk.n_tokens;
      continue;
    }
    // A first admission's first chunk starts where the prefix cache left off.
    const int64_t cached = std::max<int64_t>(0, request.cached_prompt_tokens);
    if (request.n_preemptions == 0 && chunk.start == cached)
      admissions += fmt::format("; admit request {} (prompt {}, {} cached)", request.id, request.prompt.size(), cached);
    prefills += fmt::format("; prefill request {} [{}, {}) {} tokens", request.id, chunk.start,
                            chunk.start + chunk.n_tokens, chunk.n_tokens);
  }
  for (const Request* request : plan.preempted) preemptions += fmt::format("; preempt request {}", request->id);
  if (admissions.empty() && prefills.empty() && preemptions.empty()) return {};
  std::string line = fmt::format("step {}: {} tokens{}{}", step_index, plan.n_tokens, admissions, prefills);
  if (decodes > 0) line += fmt::format("; decode {} requests ({} tokens)", decodes, decode_tokens);
  return line + preemptions;
}

}  // namespace tandem
