// describe_step() (engine/step_description.h): what `tandem serve --verbose` says a step did.
#include <gtest/gtest.h>

#include "engine/step_description.h"

namespace tandem {
namespace {

Request request(uint64_t id, int64_t prompt_tokens, int64_t cached) {
  Request r;
  r.id = id;
  r.prompt.assign(static_cast<size_t>(prompt_tokens), 1);
  r.cached_prompt_tokens = cached;
  return r;
}

TEST(StepDescription, NamesAdmissionsChunksDecodesAndPreemptions) {
  Request fresh = request(3, 90, 64), later = request(4, 40, 0), decoding = request(1, 8, 0), victim = request(2, 8, 0);
  later.n_computed = 16;
  StepPlan plan;
  plan.chunks = {{&decoding, 9, 1, true, 0}, {&fresh, 64, 26, true, 0}, {&later, 16, 16, false, 0}};
  plan.preempted = {&victim};
  plan.n_tokens = 43;
  EXPECT_EQ(describe_step(plan, 12),
            "step 12: 43 tokens; admit request 3 (prompt 90, 64 cached); prefill request 3 [64, 90) 26 tokens; "
            "prefill request 4 [16, 32) 16 tokens; decode 1 requests (1 tokens); preempt request 2");
}

TEST(StepDescription, DecodeOnlyStepsSayNothing) {
  Request a = request(1, 8, 0), b = request(2, 8, 0);
  StepPlan plan;
  plan.chunks = {{&a, 8, 1, true, 0}, {&b, 12, 1, true, 0}};
  plan.n_tokens = 2;
  EXPECT_EQ(describe_step(plan, 5), "");
}

}  // namespace
}  // namespace tandem
