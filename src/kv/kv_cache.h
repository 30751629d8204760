// KvCache: per-layer K (after RoPE) and V for every cached token, in a pool of slots.
// Each sequence has a slot table (position -> slot), and attention reads K/V through it, so
// the storage can be paged without touching the attention code. This class owns storage and
// slot bookkeeping only; it does no arithmetic. Paged use: a BlockAllocator owns the slots
// and map_blocks() derives a sequence's slot table from its block table.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_shape.h"

namespace tandem {

class KvCache {
 public:
  // Who hands out slots: this cache (reserve/truncate) or an outside block allocator
  // (map_blocks; reserve is then unavailable and truncate only shortens the table).
  enum class SlotOwner { Cache, External };

  // n_slots: tokens the pool can hold (all sequences together); max_seqs: sequence ids 0..max_seqs-1.
  KvCache(const KvShape& shape, int64_t n_slots, int32_t max_seqs, SlotOwner owner = SlotOwner::Cache);

  int64_t n_slots() const { return n_slots_; }
  int32_t max_seqs() const { return static_cast<int32_t>(tables_.size()); }
  // With external slots these count mapped positions (slots shared by a prefix count per use).
  int64_t n_free_slots() const;
  int64_t n_used_slots() const { return n_slots_ - n_free_slots(); }

  // Cached positions of a sequence (positions 0..length-1 have slots).
  int64_t length(int32_t seq) const;
  // Gives `seq` slots for positions up to new_length-1. Returns false (and changes nothing)
  // when the pool has too few free slots: a capacity outcome, not an error.
  bool reserve(int32_t seq, int64_t new_length);
  // Drops positions >= new_length of `seq`, returning their slots to the pool.
  void truncate(int32_t seq, int64_t new_length);
  void release(int32_t seq) { truncate(seq, 0); }

  const std::vector<int32_t>& slot_table(int32_t seq) const;  // [length] position -> slot

  // External slots only: makes `seq` cover positions 0..new_length-1 with
  // slot = block_table[position / block_size] * block_size + position % block_size.
  // Entries already in the table are kept (they were derived from the same blocks), so a
  // decode step appends one entry; release() the sequence before giving it other blocks.
  void map_blocks(int32_t seq, std::span<const int32_t> block_table, int32_t block_size, int64_t new_length);

  // K/V rows of one layer: [n_slots, row_stride()] floats, of which the first
  // n_kv_heads * head_dim are the row. Rows start on 64-byte lines, and the stride is one
  // line more than the row needs: strides of 1 or 3 KiB map every row of a tile to the same
  // few L1 sets, and rows split across lines cost two loads per vector.
  int64_t row_stride() const { return row_stride_; }
  float* keys(int64_t layer) { return floats(keys_) + layer * n_slots_ * row_stride_; }
  float* values(int64_t layer) { return floats(values_) + layer * n_slots_ * row_stride_; }
  const float* keys(int64_t layer) const { return floats(keys_) + layer * n_slots_ * row_stride_; }
  const float* values(int64_t layer) const { return floats(values_) + layer * n_slots_ * row_stride_; }

  // 2 (K and V) x layers x row_stride() x bytes per element: what a token's slot occupies.
  int64_t bytes_per_token() const { return bytes_per_token(n_layers_, row_stride_); }
  // The same for a model before any cache exists (pool sizing, `tandem info`).
  static int64_t row_stride(const KvShape& shape) { return (shape.kv_width() + 15) / 16 * 16 + 16; }
  static int64_t bytes_per_token(const KvShape& shape) { return bytes_per_token(shape.n_layers, row_stride(shape)); }
  int64_t bytes_in_use() const { return n_used_slots() * bytes_per_token(); }
  int64_t bytes_total() const { return n_slots_ * bytes_per_token(); }

 private:
  static int64_t bytes_per_token(int64_t n_layers, int64_t row_stride) {
    return 2 * n_layers * row_stride * static_cast<int64_t>(sizeof(float));
  }

  int64_t n_layers_;
  int64_t n_slots_;
  SlotOwner owner_;
  struct alignas(64) CacheLine {
    float values[16];
  };
  static float* floats(std::vector<CacheLine>& lines) { return lines.data()->values; }
  static const float* floats(const std::vector<CacheLine>& lines) { return lines.data()->values; }

  int64_t row_stride_;
  std::vector<CacheLine> keys_;
  std::vector<CacheLine> values_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<int32_t> free_slots_;  // a stack; lowest slot on top
};

}  // namespace tandem
