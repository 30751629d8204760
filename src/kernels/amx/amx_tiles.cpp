// ensure_tiles_configured: palette 1 with the shapes of amx_tiles.h.
#include "kernels/amx/amx_tiles.h"

#include "kernels/simd_intrinsics.h"

#include <cstdint>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("amx-tile"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("amx-tile")
#endif

namespace tandem::amx {
namespace {

struct TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
};

void set_shape(TileConfig& config, int tile, int rows, int bytes_per_row) {
  config.rows[tile] = static_cast<uint8_t>(rows);
  config.bytes_per_row[tile] = static_cast<uint16_t>(bytes_per_row);
}

}  // namespace

void ensure_tiles_configured() {
  thread_local bool configured = false;
  if (configured) return;
  alignas(64) TileConfig config{};
  config.palette_id = 1;
  set_shape(config, TANDEM_TILE_C, 16, 64);
  set_shape(config, TANDEM_TILE_A32, 16, 32);
  set_shape(config, TANDEM_TILE_B32, 8, 64);
  set_shape(config, TANDEM_TILE_A_BF16, 16, 64);
  set_shape(config, TANDEM_TILE_B_BF16, 16, 64);
  set_shape(config, TANDEM_TILE_C2, 16, 64);
  set_shape(config, TANDEM_TILE_A32_2, 16, 32);
  set_shape(config, TANDEM_TILE_B32_2, 8, 64);
  // GCC's _tile_loadconfig tells the compiler it reads only the first 8 bytes, so without
  // this barrier the shape stores above are dropped as dead.
  asm volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
  configured = true;
}

}  // namespace tandem::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
