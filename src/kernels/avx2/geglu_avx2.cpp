// AVX2 versions of Gemma's tanh-based row kernels (kernels/geglu.h; kernel_table(Isa::Avx2)
// points at them), 8 lanes at a time with masked tails (nothing read or written past a row):
// geglu_row, GELU as x·sigmoid(2u), and softcap_row through tanh_vector. The same arithmetic
// as the AVX-512 ones (kernels/avx512/geglu_avx512.cpp).
#include "kernels/simd_intrinsics.h"

#include <cstdint>

#include "kernels/avx2/avx2_kernels.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/avx2/first_lanes.h"
#include "kernels/avx2/vector_exp.h"  // AVX2 code: after the target pragma
#include "kernels/avx2/vector_tanh.h"

namespace tandem::avx2 {
namespace {

// gelu(x) = 0.5·x·(1 + tanh(u)) = x·sigmoid(2u), u = sqrt(2/pi)·(x + 0.044715·x³): the sigmoid
// form needs one exp and, unlike 1 + tanh(u), does not cancel for negative x (where the
// scalar loop's result is std::tanh's rounding error). sigmoid(z) from e = exp(-|z|), as in
// SwiGLU: 1 / (1 + e) for z >= 0, e / (1 + e) for z < 0. Huge |x|: z = ±inf, sigmoid 1 or 0.
inline __m256 geglu_vector(__m256 gate, __m256 up) {
  const __m256 x2 = _mm256_mul_ps(gate, gate);
  // z = 2u = x·(2·sqrt(2/pi) + 2·sqrt(2/pi)·0.044715·x²)
  const __m256 z =
      _mm256_mul_ps(gate, _mm256_fmadd_ps(x2, _mm256_set1_ps(7.135481387e-2f), _mm256_set1_ps(1.595769167f)));
  const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), z);
  const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_setzero_ps(), magnitude));
  const __m256 denominator = _mm256_add_ps(_mm256_set1_ps(1.0f), e);
  const __m256 negative = _mm256_cmp_ps(z, _mm256_setzero_ps(), _CMP_LT_OQ);
  const __m256 numerator = _mm256_blendv_ps(_mm256_set1_ps(1.0f), e, negative);
  return _mm256_mul_ps(_mm256_mul_ps(gate, _mm256_div_ps(numerator, denominator)), up);
}

// cap·tanh(x / cap): the division as the scalar loop does it (not x times 1/cap).
inline __m256 softcap_vector(__m256 x, __m256 cap) { return _mm256_mul_ps(cap, tanh_vector(_mm256_div_ps(x, cap))); }

}  // namespace

void geglu_row(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, geglu_vector(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    const __m256i mask = first_lanes(n - i);
    _mm256_maskstore_ps(out + i, mask,
                        geglu_vector(_mm256_maskload_ps(gate + i, mask), _mm256_maskload_ps(up + i, mask)));
  }
}

void softcap_row(const float* x, int64_t n, float cap, float* out) {
  const __m256 cap_v = _mm256_set1_ps(cap);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, softcap_vector(_mm256_loadu_ps(x + i), cap_v));
  if (i < n) {
    const __m256i mask = first_lanes(n - i);
    _mm256_maskstore_ps(out + i, mask, softcap_vector(_mm256_maskload_ps(x + i, mask), cap_v));
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
