// Micro-batches of a pipeline step: one engine Batch cut at sequence boundaries into a few
// smaller Batches, so that while stage r+1 runs micro-batch i, stage r already runs i+1. Batch
// invariance (a row's result does not depend on the other rows of its batch) makes the cut
// invisible in the outputs. Pure bookkeeping on Batch: no MPI, no model.
#pragma once

#include <cstdint>
#include <vector>

#include "model/batch.h"

namespace tandem {

// Where each micro-batch starts, as sequence indices, then batch.n_sequences(): at most
// `max_parts` parts (fewer when there are fewer sequences), each of whole sequences and about
// the same number of tokens (a part boundary falls at the first sequence end past its share).
// A batch's tokens must come sequence by sequence, in sequence order (as the engine builds them).
std::vector<int32_t> micro_batch_bounds(const Batch& batch, int32_t max_parts);

// Sequences [first_seq, end_seq) of `batch` as a Batch of their own in `out` (vectors' capacities
// reused), sequence ids renumbered from 0; their logits rows keep their order.
void extract_micro_batch(const Batch& batch, int32_t first_seq, int32_t end_seq, Batch& out);

}  // namespace tandem
