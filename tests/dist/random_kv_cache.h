// Test helper shared by test_dist and the multi-rank test_dist_mpi: a small KV cache whose
// every slot of every layer holds seeded random rows (through KvCache::store, so in the
// cache's stored types), and the byte comparison of two caches' slots.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kv/kv_cache.h"

namespace tandem::test {

// 3 layers x 2 KV heads x 64 head_dim: heads of two quant blocks each, several layers.
inline KvShape small_kv_shape() { return {.n_layers = 3, .n_kv_heads = 2, .head_dim = 64}; }

// Fills every slot of every layer of `cache` with values from `seed`: the same seed gives the
// same bytes in any cache of the same shape and types.
inline void fill_random(KvCache& cache, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> value(0.0f, 2.0f);
  std::vector<float> keys(static_cast<size_t>(cache.shape().kv_width()));
  std::vector<float> values(keys.size());
  for (int64_t layer = 0; layer < cache.shape().n_layers; ++layer)
    for (int64_t slot = 0; slot < cache.n_slots(); ++slot) {
      for (float& x : keys) x = value(rng);
      for (float& x : values) x = value(rng);
      cache.store(layer, slot, keys.data(), values.data());
    }
}

// True when slot `a_slot` of `a` and slot `b_slot` of `b` hold the same K and V bytes in every
// layer (whole rows, padding included).
inline bool same_slot_bytes(const KvCache& a, int64_t a_slot, const KvCache& b, int64_t b_slot) {
  for (int64_t layer = 0; layer < a.shape().n_layers; ++layer) {
    const KvRows rows[2][2] = {{a.keys(layer), a.values(layer)}, {b.keys(layer), b.values(layer)}};
    for (int kv = 0; kv < 2; ++kv) {
      const KvRows& x = rows[0][kv];
      const KvRows& y = rows[1][kv];
      if (x.row_bytes != y.row_bytes) return false;
      if (std::memcmp(x.data + a_slot * x.row_bytes, y.data + b_slot * y.row_bytes, static_cast<size_t>(x.row_bytes)))
        return false;
    }
  }
  return true;
}

// True when slot `slot` of `cache` is all zero bytes in every layer (never written).
inline bool slot_is_zero(const KvCache& cache, int64_t slot) {
  for (int64_t layer = 0; layer < cache.shape().n_layers; ++layer)
    for (const KvRows& rows : {cache.keys(layer), cache.values(layer)})
      for (int64_t i = 0; i < rows.row_bytes; ++i)
        if (rows.data[slot * rows.row_bytes + i] != 0) return false;
  return true;
}

}  // namespace tandem::test
