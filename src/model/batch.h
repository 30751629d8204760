// Batch: one ragged batch of tokens for the forward pass. Prefill chunks and decode tokens
// are the same thing here — a token id at a position in a sequence — so there is one
// forward path. Rows with wants_logits set get a row in the output logits, in batch order.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem {

struct Batch {
  std::vector<int32_t> tokens;        // [n_tokens]
  std::vector<int32_t> positions;     // [n_tokens] position within its sequence
  std::vector<int32_t> seq_ids;       // [n_tokens] which sequence (KV cache table) it belongs to
  std::vector<uint8_t> wants_logits;  // [n_tokens] 1 = compute logits for this row

  int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
  void clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    wants_logits.clear();
  }
  void add(int32_t token, int32_t position, int32_t seq_id, bool logits) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_ids.push_back(seq_id);
    wants_logits.push_back(logits ? 1 : 0);
  }
};

}  // namespace tandem
