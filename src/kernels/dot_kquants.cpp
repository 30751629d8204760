// K-quant dot kernels: the scalar reference of Q4_K..Q8_K and the scalar level's choice of row
// kernel (each SIMD level's are in its folder: kernels/avx2/, kernels/avx512/, reached through
// its table), the row-by-row k-quant GEMM the levels share, the portable Q8K activation
// quantizer, and the entry points that take the active level's table. Every variant computes the same exact int32 sums
// per 256-element block and then the same float update (kquant_dot_common.h), so all of them return identical bits: a
// row's result depends on neither the machine's ISA nor the batch.
#include "kernels/dot_kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "base/kquants.h"
#include "kernels/dot_low_bit_kquants.h"
#include "kernels/kernel_table.h"
#include "kernels/kquant_dot_common.h"

namespace tandem {
namespace {

using kquant_detail::finish_d;
using kquant_detail::finish_k4;

// Sum over sub-blocks of min[j] * (sum of the 32 activations of sub-block j).
inline int32_t mins_dot_sums(const uint8_t mins[8], const int16_t block_sums[16]) {
  int32_t summ = 0;
  for (int j = 0; j < 8; ++j) summ += mins[j] * (block_sums[2 * j] + block_sums[2 * j + 1]);
  return summ;
}

// ---- Scalar reference ------------------------------------------------------------------

// Q4_K and Q5_K: 32-element sub-blocks of unsigned quants with 6-bit scales and mins; they
// differ only in how the quants unpack.
template <class Block, void (*kUnpackQuants)(const Block&, uint8_t*)>
float dot_k4_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const Block*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t q[256], scales[8], mins[8];
    kUnpackQuants(w[b], q);
    unpack_k4_scales(w[b].scales, scales, mins);
    int32_t sumi = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t sub = 0;
      for (int i = 32 * j; i < 32 * j + 32; ++i) sub += q[i] * x[b].quants[i];
      sumi += scales[j] * sub;
    }
    acc += finish_k4(x[b].scale, f16_to_f32(w[b].d_f16), f16_to_f32(w[b].dmin_f16), sumi,
                     mins_dot_sums(mins, x[b].block_sums));
  }
  return acc;
}

float dot_q6k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ6K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int8_t q[256];
    unpack_q6k_quants(w[b], q);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t sub = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sub += q[i] * x[b].quants[i];
      sumi += w[b].scales[j] * sub;
    }
    acc += finish_d(x[b].scale, f16_to_f32(w[b].d_f16), sumi);
  }
  return acc;
}

float dot_q8k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ8K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t sumi = 0;
    for (int i = 0; i < 256; ++i) sumi += w[b].qs[i] * x[b].quants[i];
    acc += finish_d(x[b].scale, w[b].d, sumi);
  }
  return acc;
}

}  // namespace

void gemm_q8k_rows(KQuantRowDotFn dot, const TensorView& weight, int64_t row_begin, int64_t row_end,
                   const ActivationBlockQ8K* x, int64_t n_tokens, float* out, int64_t out_stride) {
  TANDEM_ASSERT(dot != nullptr && "gemm_q8k_rows: not a k-quant type");
  constexpr int64_t kRowTile = 16;
  const int64_t blocks_per_row = weight.row_length() / 256;
  for (int64_t tile = row_begin; tile < row_end; tile += kRowTile) {
    const int64_t tile_end = std::min(row_end, tile + kRowTile);
    for (int64_t t = 0; t < n_tokens; ++t)
      for (int64_t r = tile; r < tile_end; ++r)
        out[t * out_stride + r] = dot(weight.row(r), x + t * blocks_per_row, blocks_per_row);
  }
}

namespace portable {

KQuantRowDotFn kquant_row_dot(DType type) {
  switch (type) {
    case DType::Q4_K: return dot_k4_scalar<BlockQ4K, unpack_q4k_quants>;
    case DType::Q5_K: return dot_k4_scalar<BlockQ5K, unpack_q5k_quants>;
    case DType::Q6_K: return dot_q6k_scalar;
    case DType::Q8_K: return dot_q8k_scalar;
    default: return low_bit_kquant_row_dot_scalar(type);
  }
}

void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out) {
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(xb[i]));
    out[b].scale = amax / 127.0f;
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) {
        const int q = std::clamp(static_cast<int>(std::nearbyint(xb[i] * inverse)), -127, 127);
        out[b].quants[i] = static_cast<int8_t>(q);
        sum += q;
      }
      out[b].block_sums[j] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace portable

void quantize_activations_q8k_isa(Isa isa, const float* x, int64_t n, ActivationBlockQ8K* out) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  kernel_table(isa).quantize_q8k(x, n, out);
}

void quantize_activations_q8k(const float* x, int64_t n, ActivationBlockQ8K* out) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  kernel_table().quantize_q8k(x, n, out);
}

namespace {

float dot_with(const KernelTable& table, DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  const KQuantRowDotFn dot = table.kquant_row_dot(type);
  TANDEM_ASSERT(dot != nullptr && "dot_q8k_activations: not a k-quant type");
  return dot(weight_row, x, n / kKQuantBlockSize);
}

}  // namespace

float dot_q8k_activations_isa(Isa isa, DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n) {
  return dot_with(kernel_table(isa), type, weight_row, x, n);
}

float dot_q8k_activations(DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n) {
  return dot_with(kernel_table(), type, weight_row, x, n);
}

}  // namespace tandem
