// The AMX-BF16 instruction loop of kernels/instruction_peak.h: tdpbf16ps into the two C tiles
// of the shared configuration (amx_tiles.h) in turn, from register-resident A (bf16 1.0) and
// B (bf16 0.25) tiles. One instruction is 16 x 16 x 32 multiply-adds; each C element gains 16
// pairs x 0.5. Two accumulators are what the shared configuration has of the C shape; the
// attention kernel (attention_amx.cpp) uses the same two.
#include "kernels/simd_intrinsics.h"

#include <cstdint>

#include "kernels/amx/amx_kernels.h"
#include "kernels/amx/amx_tiles.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("amx-tile,amx-bf16"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16")
#endif

namespace tandem::amx {

InstructionLoop tile_bf16_loop(int64_t iterations) {
  ensure_tiles_configured();
  constexpr int64_t kTileElements = 16 * 32;  // bf16 in a 16 x 64-byte tile
  alignas(64) uint16_t ones[kTileElements];
  alignas(64) uint16_t quarters[kTileElements];
  for (int64_t i = 0; i < kTileElements; ++i) {
    ones[i] = 0x3F80;
    quarters[i] = 0x3E80;
  }
  _tile_loadd(TANDEM_TILE_A_BF16, ones, 64);
  _tile_loadd(TANDEM_TILE_B_BF16, quarters, 64);
  _tile_zero(TANDEM_TILE_C);
  _tile_zero(TANDEM_TILE_C2);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(TANDEM_TILE_C, TANDEM_TILE_A_BF16, TANDEM_TILE_B_BF16);
    _tile_dpbf16ps(TANDEM_TILE_C2, TANDEM_TILE_A_BF16, TANDEM_TILE_B_BF16);
  }
  alignas(64) float sums[2][16 * 16];
  _tile_stored(TANDEM_TILE_C, sums[0], 64);
  _tile_stored(TANDEM_TILE_C2, sums[1], 64);
  double checksum = 0.0;
  for (const auto& tile : sums)
    for (float x : tile) checksum += x;
  constexpr int64_t kMultiplyAdds = 16 * 16 * 32;
  return {iterations * 2 * kMultiplyAdds * 2, checksum};
}

}  // namespace tandem::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
