// The one AMX tile configuration every AMX kernel shares. Tile registers keep their shapes
// per thread until reconfigured, so all kernels agree on a single palette and each thread
// loads it once, whichever kernel runs first.
#pragma once

namespace tandem::amx {

// Tile registers and their shapes (rows x bytes per row). Macros, not constants: the
// compiler's tile intrinsics paste the register number into the instruction text.
#define TANDEM_TILE_C 0    // 16 tokens x 16 int32 (one per weight row)
#define TANDEM_TILE_A32 1  // 16 tokens x 32 int8 activations (a 32-element block)
#define TANDEM_TILE_B32 2  // 8 x 64 bytes: 32 elements of 16 weight rows in VNNI order
// bf16 attention (attention_amx.cpp): 16 rows x 32 bf16, the second operand in pairs.
#define TANDEM_TILE_A_BF16 3  // 16 x 64 bytes
#define TANDEM_TILE_B_BF16 4  // 16 x 64 bytes: 16 pairs of rows, 16 columns
// A second C/A/B set of the same shapes, so two tile multiplies can be in flight (tile
// registers are not renamed: reusing one C serialises multiply, store and the next zero).
#define TANDEM_TILE_C2 5
#define TANDEM_TILE_A32_2 6
#define TANDEM_TILE_B32_2 7

// Loads the configuration on the calling thread if it is not the one loaded there. Every AMX
// kernel calls one of these first, so a thread switches palettes only when kernels with
// different palettes follow each other (a load is a few hundred cycles). Only call after the
// runtime check found AMX (kernels/cpu_features.h).
void ensure_tiles_configured();
// The bf16 attention kernel's palette (attention_amx.cpp): all eight tiles 16 rows x 64 bytes,
// four accumulators and two of each operand, so one operand load serves four products.
void ensure_attention_tiles_configured();

}  // namespace tandem::amx
