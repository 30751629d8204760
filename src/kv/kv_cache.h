// KvCache: per-layer K (after RoPE) and V storage for a pool of fixed-size blocks of token
// slots, each stored in its KvTypes type. Storage and slot writes only: which blocks a
// sequence holds is the BlockManager's business (a block table per sequence, handed to the
// forward pass in the Batch); this class maps (block table, position) to a slot, owns the
// bytes and converts a token's float K/V rows into them (store). Attention reads them as KvRows.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/huge_page_buffer.h"
#include "kernels/attention.h"
#include "kv/kv_shape.h"
#include "kv/kv_types.h"

namespace tandem {

// Where a KvCache's K/V bytes are: in host memory, or elsewhere (a device's pool of the same
// blocks, which the engine's block tables index): then this cache only sizes and maps slots,
// and keys(), values(), store() must not be called.
enum class KvStorage { Host, None };

class KvCache {
 public:
  // n_blocks blocks of block_size token slots each, for every layer's K and V. Throws
  // InputError when the model's head size does not suit the types (check_kv_types).
  KvCache(const KvShape& shape, int64_t n_blocks, int32_t block_size, KvTypes types = {},
          KvStorage storage = KvStorage::Host);

  int64_t n_layers() const { return shape_.n_layers; }
  int64_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  int64_t n_slots() const { return n_blocks_ * block_size_; }
  const KvTypes& types() const { return types_; }
  const KvShape& shape() const { return shape_; }
  bool on_host() const { return key_bytes_ != nullptr; }

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

  // One layer's K/V rows: [n_slots, row bytes], each row the kv heads one after another in
  // the cache's type (kv_width elements), then padding (see row_bytes below).
  KvRows keys(int64_t layer) const {
    return {key_bytes_->data() + layer * n_slots() * key_row_bytes_, key_row_bytes_, types_.k};
  }
  KvRows values(int64_t layer) const {
    return {value_bytes_->data() + layer * n_slots() * value_row_bytes_, value_row_bytes_, types_.v};
  }
  // Writes a token's K and V rows ([kv_width] floats each) into `slot` of `layer`, converted
  // to the cache's types (quantize_row: the same bytes whichever batch the token came in).
  void store(int64_t layer, int64_t slot, const float* key_row, const float* value_row);
  // Writes a slot's K and V rows that are already in the cache's types (the first
  // dtype_row_bytes(type, kv_width) bytes of a row, as keys()/values() hold them): a block
  // received from another rank (kv/kv_block_message.h) is copied in, never converted twice.
  void store_converted(int64_t layer, int64_t slot, const uint8_t* key_bytes, const uint8_t* value_bytes);

  // 2 (K and V) x layers x row bytes: what a token's slot occupies.
  int64_t bytes_per_token() const { return shape_.n_layers * (key_row_bytes_ + value_row_bytes_); }
  int64_t bytes_per_block() const { return bytes_per_token() * block_size_; }
  int64_t bytes_total() const { return n_slots() * bytes_per_token(); }
  // The same for a model before any cache exists (pool sizing, `tandem info`).
  static int64_t bytes_per_token(const KvShape& shape, const KvTypes& types) {
    return shape.n_layers * (row_bytes(shape, types.k) + row_bytes(shape, types.v));
  }
  // Bytes of one layer's K (or V) row in `type`: whole 64-byte lines, so rows start on a line
  // (a row split across lines costs two loads per vector). F32 rows take one line more than
  // that, as the F32 kernels were tuned with: strides of 1 or 3 KiB map every row of a tile to
  // the same few L1 sets. The other types take the extra line only where the stride would be a
  // whole number of KiB, so that F16 holds twice the tokens of F32.
  static int64_t row_bytes(const KvShape& shape, DType type);

 private:
  KvShape shape_;
  int64_t n_blocks_;
  int32_t block_size_;
  KvTypes types_;
  int64_t key_row_bytes_;
  int64_t value_row_bytes_;
  // Huge pages: decode reads one head's slice of every slot row, rows a whole slot apart —
  // about two positions per 4 KiB page, so with small pages nearly every position was a TLB
  // miss (perf of qwen3-0.6b's decode at 4k tokens: the row loads waited on memory at a
  // fifth of the machine's read bandwidth).
  // Pages are committed as slots are first written, not when the pool is made.
  std::unique_ptr<HugePageBuffer> key_bytes_;
  std::unique_ptr<HugePageBuffer> value_bytes_;
};

}  // namespace tandem
