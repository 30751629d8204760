// SlotTable: llama-server's "slots" as Tandem has them. Tandem has no fixed slots: the engine
// runs up to --parallel sequences at once from one shared KV pool and prefix cache. A slot here
// is one of those --parallel places: a sequence the server submits takes the lowest idle one
// (none when all are busy: it waits in the engine's queue without one) and gives it back at its
// final event; the slot remembers its last sequence's tokens (prompt and generated), which is
// what /slots shows and what /slots/{id}?action=save writes out. Bookkeeping only, I/O thread only.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace tandem::server {

struct Slot {
  int32_t id = 0;
  bool processing = false;
  uint64_t task = 0;            // the engine request it runs or last ran (0: none yet)
  std::vector<int32_t> prompt;  // that sequence's prompt
  std::vector<int32_t> tokens;  // its prompt and the tokens generated so far
  int64_t n_decoded = 0;        // generated tokens
  int64_t max_tokens = 0;       // its limit
  nlohmann::json params;        // its generation settings, as /completion shows them
};

class SlotTable {
 public:
  // Sized once the engine is attached (its --parallel).
  void resize(int32_t n_slots);
  int32_t size() const { return static_cast<int32_t>(slots_.size()); }

  // A sequence starts: the lowest idle slot takes it; -1 when none is idle.
  int32_t acquire(uint64_t task, const std::vector<int32_t>& prompt, int64_t max_tokens, nlohmann::json params);
  // Tokens it generated; `finished`: its last event (the slot is idle again, its tokens kept).
  void advance(int32_t slot, const std::vector<int32_t>& tokens, bool finished);
  // Forgets the slot's last sequence (an idle slot's); returns how many tokens it had.
  int64_t erase(int32_t slot);
  // An idle slot starts over from these tokens (a restore): its record, not a sequence.
  void remember(int32_t slot, std::vector<int32_t> tokens);

  const Slot& at(int32_t slot) const { return slots_.at(static_cast<size_t>(slot)); }

  // GET /slots, llama-server's shape: per slot id, id_task, n_ctx, speculative, is_processing,
  // params (its last sequence's settings), prompt (that sequence's prompt as text) and
  // next_token {has_next_token, has_new_line, n_remain, n_decoded}.
  nlohmann::json json(const Tokenizer& tokenizer, int64_t n_ctx) const;

 private:
  std::vector<Slot> slots_;
};

}  // namespace tandem::server
