// Slots as --parallel places (see slot_table.h).
#include "server/slot_table.h"

#include <algorithm>
#include <span>

namespace tandem::server {

void SlotTable::resize(int32_t n_slots) {
  slots_.resize(static_cast<size_t>(n_slots));
  for (int32_t i = 0; i < n_slots; ++i) slots_[static_cast<size_t>(i)].id = i;
}

int32_t SlotTable::acquire(uint64_t task, const std::vector<int32_t>& prompt, int64_t max_tokens,
                           nlohmann::json params) {
  for (Slot& slot : slots_) {
    if (slot.processing) continue;
    slot.processing = true;
    slot.task = task;
    slot.prompt = prompt;
    slot.tokens = prompt;
    slot.n_decoded = 0;
    slot.max_tokens = max_tokens;
    slot.params = std::move(params);
    return slot.id;
  }
  return -1;
}

void SlotTable::advance(int32_t slot, const std::vector<int32_t>& tokens, bool finished) {
  if (slot < 0 || slot >= size()) return;
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
  s.n_decoded += static_cast<int64_t>(tokens.size());
  if (finished) s.processing = false;
}

int64_t SlotTable::erase(int32_t slot) {
  Slot& s = slots_.at(static_cast<size_t>(slot));
  const auto n = static_cast<int64_t>(s.tokens.size());
  s.prompt.clear();
  s.tokens.clear();
  s.n_decoded = 0;
  return n;
}

void SlotTable::remember(int32_t slot, std::vector<int32_t> tokens) {
  Slot& s = slots_.at(static_cast<size_t>(slot));
  s.prompt = tokens;
  s.tokens = std::move(tokens);
  s.n_decoded = 0;
}

nlohmann::json SlotTable::json(const Tokenizer& tokenizer, int64_t n_ctx) const {
  nlohmann::json out = nlohmann::json::array();
  for (const Slot& slot : slots_) {
    const std::span<const int32_t> generated =
        std::span<const int32_t>(slot.tokens).subspan(std::min(slot.prompt.size(), slot.tokens.size()));
    const std::string text = tokenizer.decode(generated);
    out.push_back({{"id", slot.id},
                   {"id_task", slot.task == 0 ? -1 : static_cast<int64_t>(slot.task)},
                   {"n_ctx", n_ctx},
                   {"speculative", false},
                   {"is_processing", slot.processing},
                   {"params", slot.params.is_null() ? nlohmann::json::object() : slot.params},
                   {"prompt", tokenizer.decode(slot.prompt)},
                   {"n_tokens", slot.tokens.size()},
                   {"next_token",
                    {{"has_next_token", slot.processing},
                     {"has_new_line", text.find('\n') != std::string::npos},
                     {"n_remain", slot.processing ? slot.max_tokens - slot.n_decoded : 0},
                     {"n_decoded", slot.n_decoded}}}});
  }
  return out;
}

}  // namespace tandem::server
