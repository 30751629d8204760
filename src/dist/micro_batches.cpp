// Micro-batch cuts (see micro_batches.h).
#include "dist/micro_batches.h"

#include <algorithm>

#include "base/error.h"

namespace tandem {

namespace {

// [n_sequences + 1] each sequence's first token, then n_tokens.
std::vector<int64_t> sequence_starts(const Batch& batch) {
  const int32_t n_seqs = batch.n_sequences();
  std::vector<int64_t> starts(static_cast<size_t>(n_seqs) + 1, 0);
  int32_t previous = 0;
  for (int64_t t = 0; t < batch.n_tokens(); ++t) {
    const int32_t seq = batch.seq_ids[static_cast<size_t>(t)];
    TANDEM_ASSERT(seq >= previous && seq < n_seqs);  // tokens come sequence by sequence
    for (int32_t s = previous + 1; s <= seq; ++s) starts[static_cast<size_t>(s)] = t;
    previous = seq;
  }
  for (int32_t s = previous + 1; s <= n_seqs; ++s) starts[static_cast<size_t>(s)] = batch.n_tokens();
  return starts;
}

}  // namespace

std::vector<int32_t> micro_batch_bounds(const Batch& batch, int32_t max_parts) {
  const int32_t n_seqs = batch.n_sequences();
  const int32_t parts = std::max(1, std::min(max_parts, n_seqs));
  const std::vector<int64_t> starts = sequence_starts(batch);
  std::vector<int32_t> bounds = {0};
  for (int32_t p = 1; p < parts; ++p) {
    const int64_t share = batch.n_tokens() * p / parts;
    // At least one sequence after the previous bound, and one left for each part still to come.
    int32_t cut = bounds.back() + 1;
    while (cut < n_seqs - (parts - p) && starts[static_cast<size_t>(cut)] < share) ++cut;
    bounds.push_back(cut);
  }
  bounds.push_back(n_seqs);
  return bounds;
}

void extract_micro_batch(const Batch& batch, int32_t first_seq, int32_t end_seq, Batch& out) {
  TANDEM_ASSERT(0 <= first_seq && first_seq < end_seq && end_seq <= batch.n_sequences());
  out.clear();
  for (int32_t s = first_seq; s < end_seq; ++s) out.add_sequence(batch.block_tables[static_cast<size_t>(s)]);
  for (int64_t t = 0; t < batch.n_tokens(); ++t) {
    const auto i = static_cast<size_t>(t);
    const int32_t seq = batch.seq_ids[i];
    if (seq < first_seq || seq >= end_seq) continue;
    out.add(batch.tokens[i], batch.positions[i], seq - first_seq, batch.wants_logits[i] != 0);
  }
}

}  // namespace tandem
