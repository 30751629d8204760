// Batch: one ragged batch of tokens for the forward pass. Prefill chunks and decode tokens
// are the same thing here — a token id at a position in a sequence — so there is one
// forward path. Each sequence of the batch comes with its block table (which KV blocks hold
// its positions, as the scheduler/block allocator decided); tokens name their sequence by
// its index in the batch. Rows with wants_logits set get a row in the output logits, in
// batch order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tandem {

struct Batch {
  std::vector<int32_t> tokens;        // [n_tokens]
  std::vector<int32_t> positions;     // [n_tokens] position within its sequence
  std::vector<int32_t> seq_ids;       // [n_tokens] index into block_tables
  std::vector<uint8_t> wants_logits;  // [n_tokens] 1 = compute logits for this row
  // [n_sequences] the KV blocks of each sequence: position p is in block_tables[s][p / block_size].
  // Copied in (a few hundred ids per sequence at most), so a batch never dangles.
  std::vector<std::vector<int32_t>> block_tables;

  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int32_t n_sequences() const { return static_cast<int32_t>(block_tables.size()); }
  void clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    wants_logits.clear();
    block_tables.clear();
  }
  // Adds a sequence whose K/V live in `block_table`'s blocks; returns its id for add().
  int32_t add_sequence(std::span<const int32_t> block_table) {
    block_tables.emplace_back(block_table.begin(), block_table.end());
    return n_sequences() - 1;
  }
  void add(int32_t token, int32_t position, int32_t seq_id, bool logits) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_ids.push_back(seq_id);
    wants_logits.push_back(logits ? 1 : 0);
  }
};

}  // namespace tandem
