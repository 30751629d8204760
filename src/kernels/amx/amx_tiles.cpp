// ensure_tiles_configured and ensure_attention_tiles_configured: palette 1 with the shapes of
// amx_tiles.h, loaded on a thread only when it is not the one loaded there.
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

enum class Palette { None, Gemm, Attention };
thread_local Palette loaded = Palette::None;

void load(TileConfig& config, Palette palette) {
  // GCC's _tile_loadconfig tells the compiler it reads only the first 8 bytes, so without
  // this barrier the shape stores are dropped as dead.
  asm volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
  loaded = palette;
}

}  // namespace

void ensure_tiles_configured() {
  if (loaded == Palette::Gemm) return;
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
  load(config, Palette::Gemm);
}

void ensure_attention_tiles_configured() {
  if (loaded == Palette::Attention) return;
  alignas(64) TileConfig config{};
  config.palette_id = 1;
  for (int tile = 0; tile < 8; ++tile) set_shape(config, tile, 16, 64);
  load(config, Palette::Attention);
}

}  // namespace tandem::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
