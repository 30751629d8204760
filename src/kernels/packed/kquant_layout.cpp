// Packing Q4_K/Q5_K/Q6_K weights into the shared 16-row VNNI layout (see kquant_layout.h).
#include "kernels/packed/kquant_layout.h"

#include <cstring>
#include <type_traits>

#include "base/error.h"
#include "base/kquants.h"
#include "kernels/packed/row_groups.h"

namespace tandem::packed {

static_assert(Q6KLayout::kBytes == 16 * sizeof(BlockQ6K));

namespace {

// Writes one sub-block's tile bytes (value of element 4k + i of row n at [k * 64 + n * 4 + i]).
template <typename GetValue>
void gather_tile_bytes(int length, GetValue value_of, uint8_t* tile) {
  for (int n = 0; n < kGroupRows; ++n)
    for (int e = 0; e < length; ++e) tile[(e / 4) * 64 + n * 4 + e % 4] = value_of(n, e);
}

void store_f16(uint8_t* out, int n, uint16_t bits) { std::memcpy(out + 2 * n, &bits, 2); }

// Q4_K and Q5_K: the same scales, mins, d and dmin; Q5_K's sub-blocks carry bit planes.
template <typename Block, typename Layout>
void pack_k4_group_block(const TensorView& weight, int64_t group, int64_t b, uint8_t* out) {
  constexpr bool kFifthBits = std::is_same_v<Block, BlockQ5K>;
  uint8_t q[kGroupRows][256] = {};
  uint8_t scales[kGroupRows][8] = {}, mins[kGroupRows][8] = {};
  for (int n = 0; n < kGroupRows; ++n) {
    const int64_t row = group * kGroupRows + n;
    store_f16(out + Layout::kD, n, 0);
    store_f16(out + Layout::kDmin, n, 0);
    if (row >= weight.n_rows()) continue;
    const Block& block = reinterpret_cast<const Block*>(weight.row(row))[b];
    if constexpr (kFifthBits)
      unpack_q5k_quants(block, q[n]);
    else
      unpack_q4k_quants(block, q[n]);
    unpack_k4_scales(block.scales, scales[n], mins[n]);
    store_f16(out + Layout::kD, n, block.d_f16);
    store_f16(out + Layout::kDmin, n, block.dmin_f16);
  }
  for (int j = 0; j < 8; ++j) {
    uint8_t tile[512];
    gather_tile_bytes(
        32, [&](int n, int e) { return q[n][32 * j + e]; }, tile);
    uint8_t* sub_block = out + Layout::kSubBlockBytes * j;
    for (int p = 0; p < 256; ++p) sub_block[p] = static_cast<uint8_t>((tile[p] & 0x0f) | ((tile[p + 256] & 0x0f) << 4));
    if constexpr (kFifthBits) {
      std::memset(sub_block + Q5KLayout::kFifthBits, 0, 64);
      for (int m = 0; m < 8; ++m)
        for (int p = 0; p < 64; ++p)
          sub_block[Q5KLayout::kFifthBits + p] |= static_cast<uint8_t>(((tile[64 * m + p] >> 4) & 1) << m);
    }
  }
  for (int i = 0; i < 4; ++i)
    for (int n = 0; n < kGroupRows; ++n)
      for (int e = 0; e < 2; ++e) {
        out[Layout::kScales + 32 * i + 2 * n + e] = scales[n][2 * i + e];
        out[Layout::kMins + 32 * i + 2 * n + e] = mins[n][2 * i + e];
      }
}

void pack_q6k_group_block(const TensorView& weight, int64_t group, int64_t b, uint8_t* out) {
  uint8_t q[kGroupRows][256] = {};  // q + 32
  int8_t scales[kGroupRows][16] = {};
  for (int n = 0; n < kGroupRows; ++n) {
    const int64_t row = group * kGroupRows + n;
    store_f16(out + Q6KLayout::kD, n, 0);
    if (row >= weight.n_rows()) continue;
    const BlockQ6K& block = reinterpret_cast<const BlockQ6K*>(weight.row(row))[b];
    int8_t values[256];
    unpack_q6k_quants(block, values);
    for (int e = 0; e < 256; ++e) q[n][e] = static_cast<uint8_t>(values[e] + 32);
    std::memcpy(scales[n], block.scales, 16);
    store_f16(out + Q6KLayout::kD, n, block.d_f16);
  }
  for (int j = 0; j < 16; ++j) {
    uint8_t tile[256];
    gather_tile_bytes(
        16, [&](int n, int e) { return q[n][16 * j + e]; }, tile);
    uint8_t* sub_block = out + 192 * j;
    for (int p = 0; p < 128; ++p) sub_block[p] = static_cast<uint8_t>((tile[p] & 0x0f) | ((tile[p + 128] & 0x0f) << 4));
    for (int p = 0; p < 64; ++p)
      sub_block[128 + p] = static_cast<uint8_t>((tile[p] >> 4) | ((tile[p + 64] >> 4) << 2) |
                                                ((tile[p + 128] >> 4) << 4) | ((tile[p + 192] >> 4) << 6));
  }
  for (int i = 0; i < 8; ++i)
    for (int n = 0; n < kGroupRows; ++n)
      for (int e = 0; e < 2; ++e)
        out[Q6KLayout::kScales + 32 * i + 2 * n + e] = static_cast<uint8_t>(scales[n][2 * i + e]);
}

}  // namespace

bool kquant_packable(const TensorView& weight) {
  return weight.n_dims == 2 &&
         (weight.dtype == DType::Q4_K || weight.dtype == DType::Q5_K || weight.dtype == DType::Q6_K) &&
         weight.row_length() % 256 == 0;
}

int64_t kquant_packed_bytes(const TensorView& weight) {
  return row_groups(weight.n_rows()) * (weight.row_length() / 256) * kquant_group_block_bytes(weight.dtype);
}

void kquant_pack_into(const TensorView& weight, uint8_t* packed_out) {
  TANDEM_ASSERT(kquant_packable(weight));
  const int64_t n_blocks = weight.row_length() / 256;
  const int64_t bytes = kquant_group_block_bytes(weight.dtype);
  for (int64_t g = 0; g < row_groups(weight.n_rows()); ++g)
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* out = packed_out + (g * n_blocks + b) * bytes;
      if (weight.dtype == DType::Q4_K)
        pack_k4_group_block<BlockQ4K, Q4KLayout>(weight, g, b, out);
      else if (weight.dtype == DType::Q5_K)
        pack_k4_group_block<BlockQ5K, Q5KLayout>(weight, g, b, out);
      else
        pack_q6k_group_block(weight, g, b, out);
    }
}

}  // namespace tandem::packed
