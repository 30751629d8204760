// AVX-512 versions of Gemma's tanh-based row kernels (kernels/geglu.h; kernel_table(Isa::Avx512)
// and the AMX level point at them), 16 lanes at a time with masked tails (nothing read or
// written past a row): geglu_row, GELU as x·sigmoid(2u), and softcap_row through tanh_vector.
// The same arithmetic as the AVX2 ones (kernels/avx2/geglu_avx2.cpp, which says why).
#include "kernels/simd_intrinsics.h"

#include <cstdint>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/geglu.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif

#include "kernels/avx512/first_lanes.h"
#include "kernels/avx512/vector_exp.h"  // AVX-512 code: after the target pragma
#include "kernels/avx512/vector_tanh.h"

namespace tandem::avx512 {
namespace {

// gelu(x)·up = x·sigmoid(z)·up, z = x·(2·sqrt(2/pi) + 2·sqrt(2/pi)·0.044715·x²).
inline __m512 geglu_vector(__m512 gate, __m512 up) {
  const __m512 x2 = _mm512_mul_ps(gate, gate);
  const __m512 z =
      _mm512_mul_ps(gate, _mm512_fmadd_ps(x2, _mm512_set1_ps(7.135481387e-2f), _mm512_set1_ps(1.595769167f)));
  const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(z)));
  const __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
  const __mmask16 negative = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 numerator = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), negative, e);
  return _mm512_mul_ps(_mm512_mul_ps(gate, _mm512_div_ps(numerator, denominator)), up);
}

inline __m512 softcap_vector(__m512 x, __m512 cap) { return _mm512_mul_ps(cap, tanh_vector(_mm512_div_ps(x, cap))); }

}  // namespace

void geglu_row(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, geglu_vector(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 mask = first_lanes(n - i);
    _mm512_mask_storeu_ps(out + i, mask,
                          geglu_vector(_mm512_maskz_loadu_ps(mask, gate + i), _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

void softcap_row(const float* x, int64_t n, float cap, float* out) {
  const __m512 cap_v = _mm512_set1_ps(cap);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, softcap_vector(_mm512_loadu_ps(x + i), cap_v));
  if (i < n) {
    const __mmask16 mask = first_lanes(n - i);
    _mm512_mask_storeu_ps(out + i, mask, softcap_vector(_mm512_maskz_loadu_ps(mask, x + i), cap_v));
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
