// AVX-512 versions of the per-row kernels (kernel_table(Isa::Avx512) and the AMX level point
// at them): swiglu_row with a vector exp; rmsnorm_row and rope_apply, the portable loops of
// kernels/elementwise.cpp in vector lanes. Tails are masked: nothing is read or written past a row.
#include "kernels/simd_intrinsics.h"

#include <cmath>
#include <cstdint>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/elementwise.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

#include "kernels/avx512/first_lanes.h"
#include "kernels/avx512/vector_exp.h"  // AVX-512 code: after the target pragma

namespace tandem::avx512 {
namespace {

// silu(g) * up with sigmoid(g) from exp(-|g|) (never overflows): 1 / (1 + e) for g >= 0,
// e / (1 + e) for g < 0.
inline __m512 swiglu_vector(__m512 gate, __m512 up) {
  const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(gate)));
  const __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
  const __mmask16 negative = _mm512_cmp_ps_mask(gate, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 numerator = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), negative, e);
  return _mm512_mul_ps(_mm512_mul_ps(gate, _mm512_div_ps(numerator, denominator)), up);
}

// Eight pairs (a, b) = (v[2j], v[2j+1]) rotated by (c[j], s[j]): with c, s each repeated over
// its pair and v' the pairs swapped, fmaddsub(v, c, v' * s) = (a c - b s, b c + a s).
inline __m512 rotate_pairs(__m512 v, __m256 c, __m256 s) {
  const __m512i repeat_pairs = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512 cos_v = _mm512_permutexvar_ps(repeat_pairs, _mm512_castps256_ps512(c));
  const __m512 sin_v = _mm512_permutexvar_ps(repeat_pairs, _mm512_castps256_ps512(s));
  const __m512 swapped = _mm512_permute_ps(v, 0xB1);  // (b, a) per pair
  return _mm512_fmaddsub_ps(v, cos_v, _mm512_mul_ps(swapped, sin_v));
}

}  // namespace

void swiglu_row(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, swiglu_vector(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, mask,
                          swiglu_vector(_mm512_maskz_loadu_ps(mask, gate + i), _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

// The sum of squares in 64 float lanes (4 accumulators: x[i] goes to lane i % 64 while 64
// elements remain, then the last < 64 to accumulators 0 and 1), the lanes added in a fixed
// tree and the last 16 in double. The order depends only on n, so a row's bits never depend
// on its batch; 64 partial sums keep the float error ~1e-7 relative for rows of thousands.
void rmsnorm_row(const float* x, const float* weight, int64_t n, float eps, float* out) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
    const __m512 x2 = _mm512_loadu_ps(x + i + 32), x3 = _mm512_loadu_ps(x + i + 48);
    acc0 = _mm512_fmadd_ps(x0, x0, acc0);
    acc1 = _mm512_fmadd_ps(x1, x1, acc1);
    acc2 = _mm512_fmadd_ps(x2, x2, acc2);
    acc3 = _mm512_fmadd_ps(x3, x3, acc3);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    acc0 = _mm512_fmadd_ps(v, v, acc0);
  }
  if (i < n) {
    const __m512 v = _mm512_maskz_loadu_ps(first_lanes(n - i), x + i);  // zeros past n
    acc1 = _mm512_fmadd_ps(v, v, acc1);
  }
  const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc0, acc1), _mm512_add_ps(acc2, acc3));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  double sum_squares = 0.0;
  for (float lane : lanes) sum_squares += lane;
  const float scale = static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps));

  // out = x * scale * weight, in the portable loop's order (out may alias x).
  const __m512 scale_v = _mm512_set1_ps(scale);
  for (i = 0; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i,
                     _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), scale_v), _mm512_loadu_ps(weight + i)));
  if (i < n) {
    const __mmask16 mask = first_lanes(n - i);
    _mm512_mask_storeu_ps(out + i, mask,
                          _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mask, x + i), scale_v),
                                        _mm512_maskz_loadu_ps(mask, weight + i)));
  }
}

// Eight pairs per vector; the last < 8 pairs of a head masked (dims past rope_dims untouched).
void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos_table,
                const float* sin_table) {
  const int64_t n_pairs = rope_dims / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    int64_t i = 0;
    for (; i + 8 <= n_pairs; i += 8)
      _mm512_storeu_ps(head + 2 * i, rotate_pairs(_mm512_loadu_ps(head + 2 * i), _mm256_loadu_ps(cos_table + i),
                                                  _mm256_loadu_ps(sin_table + i)));
    if (i < n_pairs) {
      const __mmask16 mask = first_lanes(2 * (n_pairs - i));
      const auto table_mask = static_cast<__mmask8>(first_lanes(n_pairs - i));
      _mm512_mask_storeu_ps(
          head + 2 * i, mask,
          rotate_pairs(_mm512_maskz_loadu_ps(mask, head + 2 * i), _mm256_maskz_loadu_ps(table_mask, cos_table + i),
                       _mm256_maskz_loadu_ps(table_mask, sin_table + i)));
    }
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
