// KvCache bookkeeping: a free-slot stack and per-sequence slot tables. Slots are handed out
// lowest first so a lone sequence's K/V end up contiguous (friendly to the cache lines).
#include "kv/kv_cache.h"

#include "base/error.h"

namespace tandem {

KvCache::KvCache(const KvShape& shape, int64_t n_slots, int32_t max_seqs, SlotOwner owner)
    : n_layers_(shape.n_layers), n_slots_(n_slots), owner_(owner), row_stride_(row_stride(shape)) {
  TANDEM_ASSERT(n_slots > 0 && max_seqs > 0);
  const auto lines = static_cast<size_t>(n_layers_ * n_slots_ * row_stride_ / 16);
  keys_.assign(lines, CacheLine{});
  values_.assign(lines, CacheLine{});
  tables_.resize(static_cast<size_t>(max_seqs));
  if (owner_ == SlotOwner::External) return;
  free_slots_.reserve(static_cast<size_t>(n_slots));
  for (int64_t slot = n_slots - 1; slot >= 0; --slot) free_slots_.push_back(static_cast<int32_t>(slot));
}

int64_t KvCache::length(int32_t seq) const { return static_cast<int64_t>(slot_table(seq).size()); }

const std::vector<int32_t>& KvCache::slot_table(int32_t seq) const {
  TANDEM_ASSERT(seq >= 0 && seq < max_seqs());
  return tables_[static_cast<size_t>(seq)];
}

int64_t KvCache::n_free_slots() const {
  if (owner_ == SlotOwner::Cache) return static_cast<int64_t>(free_slots_.size());
  int64_t mapped = 0;
  for (const std::vector<int32_t>& table : tables_) mapped += static_cast<int64_t>(table.size());
  return n_slots_ - mapped;
}

bool KvCache::reserve(int32_t seq, int64_t new_length) {
  TANDEM_ASSERT(owner_ == SlotOwner::Cache);
  TANDEM_ASSERT(seq >= 0 && seq < max_seqs());
  std::vector<int32_t>& table = tables_[static_cast<size_t>(seq)];
  const int64_t needed = new_length - static_cast<int64_t>(table.size());
  if (needed <= 0) return true;
  if (needed > n_free_slots()) return false;
  for (int64_t i = 0; i < needed; ++i) {
    table.push_back(free_slots_.back());
    free_slots_.pop_back();
  }
  return true;
}

void KvCache::truncate(int32_t seq, int64_t new_length) {
  TANDEM_ASSERT(seq >= 0 && seq < max_seqs() && new_length >= 0);
  std::vector<int32_t>& table = tables_[static_cast<size_t>(seq)];
  while (static_cast<int64_t>(table.size()) > new_length) {
    if (owner_ == SlotOwner::Cache) free_slots_.push_back(table.back());
    table.pop_back();
  }
}

void KvCache::map_blocks(int32_t seq, std::span<const int32_t> block_table, int32_t block_size, int64_t new_length) {
  TANDEM_ASSERT(owner_ == SlotOwner::External);
  TANDEM_ASSERT(seq >= 0 && seq < max_seqs() && block_size > 0);
  TANDEM_ASSERT(new_length <= static_cast<int64_t>(block_table.size()) * block_size);
  std::vector<int32_t>& table = tables_[static_cast<size_t>(seq)];
  if (static_cast<int64_t>(table.size()) > new_length) table.resize(static_cast<size_t>(new_length));
  for (auto position = static_cast<int64_t>(table.size()); position < new_length; ++position) {
    const int64_t block = block_table[static_cast<size_t>(position / block_size)];
    TANDEM_ASSERT(block >= 0 && (block + 1) * block_size <= n_slots_);
    table.push_back(static_cast<int32_t>(block * block_size + position % block_size));
  }
}


}  // namespace tandem
