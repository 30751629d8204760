// KvCache: per-layer K (after RoPE) and V storage for a pool of fixed-size blocks of token
// slots. Storage only: which blocks a sequence holds is the BlockManager's business (a block
// table per sequence, handed to the forward pass in the Batch); this class maps (block
// table, position) to a slot and owns the floats. No arithmetic here.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_shape.h"

namespace tandem {

class KvCache {
 public:
  // n_blocks blocks of block_size token slots each, for every layer's K and V.
  KvCache(const KvShape& shape, int64_t n_blocks, int32_t block_size);

  int64_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t n_slots() const { return n_blocks_ * block_size_; }

  // The slot of `position` in a sequence whose blocks are `block_table` (one block per
  // block_size positions): block_table[position / block_size] * block_size + position % block_size.
  int32_t slot(std::span<const int32_t> block_table, int64_t position) const {
    return static_cast<int32_t>(block_table[static_cast<size_t>(position / block_size_)] * block_size_ +
                                position % block_size_);
  }

  // Blocks 0..n_blocks-1 in order: the block table of a lone sequence that owns the whole
  // pool (perplexity and the prefill benchmark drive Forward directly, without an Engine).
  std::vector<int32_t> whole_pool_blocks() const {
    std::vector<int32_t> table(static_cast<size_t>(n_blocks_));
    for (int64_t b = 0; b < n_blocks_; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b);
    return table;
  }

  // K/V rows of one layer: [n_slots, row_stride()] floats, of which the first
  // n_kv_heads * head_dim are the row. Rows start on 64-byte lines, and the stride is one
  // line more than the row needs: strides of 1 or 3 KiB map every row of a tile to the same
  // few L1 sets, and rows split across lines cost two loads per vector.
  int64_t row_stride() const { return row_stride_; }
  float* keys(int64_t layer) { return floats(keys_) + layer * n_slots() * row_stride_; }
  float* values(int64_t layer) { return floats(values_) + layer * n_slots() * row_stride_; }
  const float* keys(int64_t layer) const { return floats(keys_) + layer * n_slots() * row_stride_; }
  const float* values(int64_t layer) const { return floats(values_) + layer * n_slots() * row_stride_; }

  // 2 (K and V) x layers x row_stride() x bytes per element: what a token's slot occupies.
  int64_t bytes_per_token() const { return bytes_per_token(n_layers_, row_stride_); }
  int64_t bytes_per_block() const { return bytes_per_token() * block_size_; }
  int64_t bytes_total() const { return n_slots() * bytes_per_token(); }
  // The same for a model before any cache exists (pool sizing, `tandem info`).
  static int64_t row_stride(const KvShape& shape) { return (shape.kv_width() + 15) / 16 * 16 + 16; }
  static int64_t bytes_per_token(const KvShape& shape) { return bytes_per_token(shape.n_layers, row_stride(shape)); }

 private:
  static int64_t bytes_per_token(int64_t n_layers, int64_t row_stride) {
    return 2 * n_layers * row_stride * static_cast<int64_t>(sizeof(float));
  }

  int64_t n_layers_;
  int64_t n_blocks_;
  int32_t block_size_;
  struct alignas(64) CacheLine {
    float values[16];
  };
  static float* floats(std::vector<CacheLine>& lines) { return lines.data()->values; }
  static const float* floats(const std::vector<CacheLine>& lines) { return lines.data()->values; }

  int64_t row_stride_;
  std::vector<CacheLine> keys_;
  std::vector<CacheLine> values_;
};

}  // namespace tandem
