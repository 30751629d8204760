// AVX2 version of gpt-oss's expert activation (kernels/swiglu_oai.h; kernel_table(Isa::Avx2)
// points at it), 8 lanes at a time with masked tails (nothing read or written past a row).
// The same arithmetic as the AVX-512 one (kernels/avx512/swiglu_oai_avx512.cpp).
#include "kernels/simd_intrinsics.h"

#include <cstdint>

#include "kernels/avx2/avx2_kernels.h"
#include "kernels/swiglu_oai.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/avx2/first_lanes.h"
#include "kernels/avx2/vector_exp.h"  // AVX2 code: after the target pragma

namespace tandem::avx2 {
namespace {

// g·sigmoid(z)·(u + 1), z = alpha·g rounded to float as the scalar loop rounds it (the
// function's conditioning for very negative g is then the same at every level). sigmoid(z)
// from e = exp(-|z|), as in SwiGLU, which never overflows: g / (1 + e) for z >= 0 (the scalar
// loop's own division), g·e / (1 + e) for z < 0. g = -inf gives -inf·0 = NaN, as the scalar
// loop's -inf / inf does.
inline __m256 swiglu_oai_vector(__m256 gate, __m256 up) {
  const __m256 limit = _mm256_set1_ps(kSwigluOaiLimit);
  // min/max return their second operand when either is NaN: with the input second, a NaN
  // passes through the clamps as it does through std::min and std::clamp.
  const __m256 g = _mm256_min_ps(limit, gate);
  const __m256 u = _mm256_min_ps(limit, _mm256_max_ps(_mm256_set1_ps(-kSwigluOaiLimit), up));
  const __m256 z = _mm256_mul_ps(_mm256_set1_ps(kSwigluOaiAlpha), g);
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
  const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_setzero_ps(), magnitude));
  const __m256 denominator = _mm256_add_ps(_mm256_set1_ps(1.0f), e);
  const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 numerator = _mm256_blendv_ps(g, _mm256_mul_ps(g, e), negative);
  return _mm256_mul_ps(_mm256_div_ps(numerator, denominator), _mm256_add_ps(u, _mm256_set1_ps(1.0f)));
}

}  // namespace

void swiglu_oai_row(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, swiglu_oai_vector(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i mask = first_lanes(n - i);
    _mm256_maskstore_ps(out + i, mask,
                        swiglu_oai_vector(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask)));
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
