// AVX2 versions of the per-row kernels (kernel_table(Isa::Avx2) points at them): swiglu_row
// with the same arithmetic as avx512::swiglu_row, 8 lanes at a time; rmsnorm_row and
// rope_apply, the portable loops of kernels/elementwise.cpp in vector lanes. Tails are masked:
// nothing is read or written past a row.
#include "kernels/simd_intrinsics.h"

#include <cmath>
#include <cstdint>

#include "kernels/avx2/avx2_kernels.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/avx2/first_lanes.h"  // AVX2 code: after the target pragma
#include "kernels/avx2/vector_exp.h"

namespace tandem::avx2 {
namespace {

// silu(g) * up with sigmoid(g) from exp(-|g|) (never overflows): 1 / (1 + e) for g >= 0,
// e / (1 + e) for g < 0.
inline __m256 swiglu_vector(__m256 gate, __m256 up) {
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), gate);
  const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_setzero_ps(), magnitude));
  const __m256 denominator = _mm256_add_ps(_mm256_set1_ps(1.0f), e);
  const __m256 negative = _mm256_cmp_ps(gate, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 numerator = _mm256_blendv_ps(_mm256_set1_ps(1.0f), e, negative);
  return _mm256_mul_ps(_mm256_mul_ps(gate, _mm256_div_ps(numerator, denominator)), up);
}

// Four pairs (a, b) = (v[2j], v[2j+1]) rotated by (c[j], s[j]): with c, s each repeated over
// its pair and v' the pairs swapped, fmaddsub(v, c, v' * s) = (a c - b s, b c + a s).
inline __m256 rotate_pairs(__m256 v, __m128 c, __m128 s) {
  const __m256i repeat_pairs = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  const __m256 cos_v = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(c), repeat_pairs);
  const __m256 sin_v = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(s), repeat_pairs);
  const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (b, a) per pair
  return _mm256_fmaddsub_ps(v, cos_v, _mm256_mul_ps(swapped, sin_v));
}

}  // namespace

void swiglu_row(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, swiglu_vector(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    // Lanes below n - i: masked loads and stores neither read nor write past n (and never fault).
    const __m256i mask = first_lanes(n - i);
    _mm256_maskstore_ps(out + i, mask,
                        swiglu_vector(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask)));
  }
}

// The sum of squares in 32 float lanes (4 accumulators: x[i] goes to lane i % 32 while 32
// elements remain, then the last < 32 to accumulators 0 and 1), the lanes added in a fixed
// tree and the last 8 in double. The order depends only on n, so a row's bits never depend
// on its batch; 32 partial sums keep the float error ~1e-7 relative for rows of thousands.
void rmsnorm_row(const float* x, const float* weight, int64_t n, float eps, float* out) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
    const __m256 x2 = _mm256_loadu_ps(x + i + 16), x3 = _mm256_loadu_ps(x + i + 24);
    acc0 = _mm256_fmadd_ps(x0, x0, acc0);
    acc1 = _mm256_fmadd_ps(x1, x1, acc1);
    acc2 = _mm256_fmadd_ps(x2, x2, acc2);
    acc3 = _mm256_fmadd_ps(x3, x3, acc3);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc0 = _mm256_fmadd_ps(v, v, acc0);
  }
  if (i < n) {
    const __m256 v = _mm256_maskload_ps(x + i, first_lanes(n - i));  // zeros past n
    acc1 = _mm256_fmadd_ps(v, v, acc1);
  }
  const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  double sum_squares = 0.0;
  for (float lane : lanes) sum_squares += lane;
  const float scale = static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps));

  // out = x * scale * weight, in the portable loop's order (out may alias x).
  const __m256 scale_v = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), scale_v), _mm256_loadu_ps(weight + i)));
  if (i < n) {
    const __m256i mask = first_lanes(n - i);
    _mm256_maskstore_ps(
        out + i, mask,
        _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(x + i, mask), scale_v), _mm256_maskload_ps(weight + i, mask)));
  }
}

// Four pairs per vector; the last < 4 pairs of a head masked (dims past rope_dims untouched).
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos_table,
                const float* sin_table) {
  const int64_t n_pairs = rope_dims / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    int64_t i = 0;
    for (; i + 4 <= n_pairs; i += 4)
      _mm256_storeu_ps(head + 2 * i, rotate_pairs(_mm256_loadu_ps(head + 2 * i), _mm_loadu_ps(cos_table + i),
                                                  _mm_loadu_ps(sin_table + i)));
    if (i < n_pairs) {
      const __m256i mask = first_lanes(2 * (n_pairs - i));
      const __m128i table_mask = _mm256_castsi256_si128(first_lanes(n_pairs - i));
      _mm256_maskstore_ps(
          head + 2 * i, mask,
          rotate_pairs(_mm256_maskload_ps(head + 2 * i, mask), _mm_maskload_ps(cos_table + i, table_mask),
                       _mm_maskload_ps(sin_table + i, table_mask)));
    }
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
