// One line on what a step's plan decided, for `tandem serve --verbose`: admissions (with the
// prompt tokens the prefix cache served), prefill chunks and their sizes, decodes, preemptions.
// Read from the plan before it runs; a pure function of it, no clock, no I/O.
#pragma once

#include <string>

#include "engine/scheduler.h"

namespace tandem {

// Empty for a plan of decodes only (one a token: logging them would flood the log); else
// e.g. "step 12: 74 tokens; admit request 3 (prompt 90, 64 cached); prefill request 3
// [64, 128) 64 tokens; decode 2 requests (10 tokens); preempt request 2".
std::string describe_step(const StepPlan& plan, int64_t step_index);

}  // namespace tandem
