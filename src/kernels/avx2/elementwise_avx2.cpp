// AVX2 versions of the per-row kernels whose portable loops call libm per element
// (kernels/elementwise.h chooses them when the active level is AVX2). Only swiglu_row so far:
// the same arithmetic as avx512::swiglu_row, 8 lanes at a time.
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx2/avx2_kernels.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/avx2/vector_exp.h"  // AVX2 code: after the target pragma

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

}  // namespace

void swiglu_row(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, swiglu_vector(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    // Lanes below n - i: masked loads and stores neither read nor write past n (and never fault).
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n - i)),
                                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    _mm256_maskstore_ps(out + i, mask,
                        swiglu_vector(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask)));
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
