// KvCache storage (see kv_cache.h): zero-filled, 64-byte aligned K and V pools, and the
// conversion of a token's rows into them.
#include "kv/kv_cache.h"

#include <cstring>

#include "base/error.h"
#include "base/quant.h"

namespace tandem {

namespace {
constexpr int64_t kLine = 64;
}

int64_t KvCache::row_bytes(const KvShape& shape, DType type) {
  const int64_t lines = (dtype_row_bytes(type, shape.kv_width()) + kLine - 1) / kLine;
  const bool extra_line = type == DType::F32 || (lines * kLine) % 1024 == 0;
  return (lines + (extra_line ? 1 : 0)) * kLine;
}

KvCache::KvCache(const KvShape& shape, int64_t n_blocks, int32_t block_size, KvTypes types, KvStorage storage)
    : shape_(shape),
      n_blocks_(n_blocks),
      block_size_(block_size),
      types_([&] {
        check_kv_types(shape, types);
        return types;
      }()),
      key_row_bytes_(row_bytes(shape, types.k)),
      value_row_bytes_(row_bytes(shape, types.v)) {
  TANDEM_ASSERT(n_blocks > 0 && block_size > 0);
  TANDEM_ASSERT(n_slots() <= INT32_MAX);  // slots are int32 in the attention kernels
  if (storage == KvStorage::None) return;
  key_bytes_ = std::make_unique<HugePageBuffer>(static_cast<size_t>(shape_.n_layers * n_slots() * key_row_bytes_));
  value_bytes_ = std::make_unique<HugePageBuffer>(static_cast<size_t>(shape_.n_layers * n_slots() * value_row_bytes_));
}

void KvCache::store(int64_t layer, int64_t slot, const float* key_row, const float* value_row) {
  TANDEM_ASSERT(on_host() && layer >= 0 && layer < shape_.n_layers && slot >= 0 && slot < n_slots());
  uint8_t* keys = key_bytes_->data() + (layer * n_slots() + slot) * key_row_bytes_;
  uint8_t* values = value_bytes_->data() + (layer * n_slots() + slot) * value_row_bytes_;
  quantize_row(types_.k, key_row, keys, shape_.kv_width());
  quantize_row(types_.v, value_row, values, shape_.kv_width());
}

void KvCache::store_converted(int64_t layer, int64_t slot, const uint8_t* key_bytes, const uint8_t* value_bytes) {
  TANDEM_ASSERT(on_host() && layer >= 0 && layer < shape_.n_layers && slot >= 0 && slot < n_slots());
  uint8_t* keys = key_bytes_->data() + (layer * n_slots() + slot) * key_row_bytes_;
  uint8_t* values = value_bytes_->data() + (layer * n_slots() + slot) * value_row_bytes_;
  std::memcpy(keys, key_bytes, static_cast<size_t>(dtype_row_bytes(types_.k, shape_.kv_width())));
  std::memcpy(values, value_bytes, static_cast<size_t>(dtype_row_bytes(types_.v, shape_.kv_width())));
}

}  // namespace tandem
