// Plan -> ragged Batch (see step_batch.h).
#include "engine/step_batch.h"

#include "base/error.h"

namespace tandem {

bool build_step_batch(const StepPlan& plan, const BlockManager& blocks, Batch& batch,
                      std::vector<int64_t>& chunk_first_rows) {
  batch.clear();
  chunk_first_rows.clear();
  bool decode_only = true;
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Request& request = *chunk.request;
    // The scheduler grew the block table to cover the chunk; the forward pass reads it.
    const int32_t seq = batch.add_sequence(request.blocks.table);
    chunk_first_rows.push_back(batch.n_tokens());
    const int64_t n_known = chunk.n_tokens - chunk.n_draft;
    decode_only = decode_only && n_known == 1;
    for (int64_t i = 0; i < n_known; ++i) {
      const int64_t position = chunk.start + i;
      batch.add(request.tokens[static_cast<size_t>(position)], static_cast<int32_t>(position), seq,
                (chunk.samples && i == n_known - 1) || chunk.n_draft > 0);
    }
    if (chunk.n_draft == 0) continue;
    // Proposed tokens go where the sequence's own next tokens would: blocks no other
    // sequence or the prefix cache can see, so a rejected proposal harms nothing.
    TANDEM_ASSERT(blocks.writable_from(request.blocks, chunk.start + n_known));
    for (int64_t i = 0; i < chunk.n_draft; ++i)
      batch.add(request.draft[static_cast<size_t>(i)], static_cast<int32_t>(chunk.start + n_known + i), seq, true);
  }
  return decode_only;
}

}  // namespace tandem
