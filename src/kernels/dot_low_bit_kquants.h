// Row dot products of the low-bit 256-element weight types (Q2_K, Q3_K, IQ4_XS; layouts in
// base/kquants_low_bit.h) against activations in 256-element 8-bit blocks: the scalar level.
// Same contract as the other k-quants (kernels/dot_kquants.h): exact int32 sums per
// super-block, one shared float update, so every level returns the same bits.
#pragma once

#include "base/dtype.h"
#include "kernels/cpu_features.h"
#include "kernels/dot_kquants.h"

namespace tandem {

// The scalar reference row kernel for Q2_K, Q3_K or IQ4_XS; nullptr for any other type (the
// scalar level's choice for every k-quant type: portable::kquant_row_dot).
KQuantRowDotFn low_bit_kquant_row_dot_scalar(DType type);

}  // namespace tandem
