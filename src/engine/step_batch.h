// The step's plan as one ragged Batch for the forward pass: each scheduled chunk becomes a
// sequence of the batch (with the block table the scheduler grew for it) and its tokens, a
// decode's proposed tokens after its pending one. Which rows want logits is decided here: a
// chunk's last known token when it samples, and every row of a speculating decode. Reads the
// plan; runs nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/scheduler.h"
#include "kv/block_manager.h"
#include "model/batch.h"

namespace tandem {

// Fills `batch` (cleared first) from `plan`, and chunk_first_rows with each chunk's first row
// in it. Returns whether every chunk is one known token (plus proposals): a decode step, for
// the profile. `blocks` only checks that proposals go where no other sequence reads.
bool build_step_batch(const StepPlan& plan, const BlockManager& blocks, Batch& batch,
                      std::vector<int64_t>& chunk_first_rows);

}  // namespace tandem
