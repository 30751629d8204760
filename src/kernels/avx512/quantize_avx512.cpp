// The AVX-512 activation quantizers: f32 rows to 32-element (Q8) and 256-element (Q8K) 8-bit
// blocks, writing the same bytes as the portable loops (kernels/dot.cpp, dot_kquants.cpp).
#include "kernels/simd_intrinsics.h"

#include "base/kquants.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"

namespace tandem::avx512 {

// The same bytes as the portable loop: max is exact in any order (and, like fmax, keeps the
// running value when an input is NaN), and product and rounding (to nearest, ties to even)
// are the same per element. The portable loop calls libm's fmax/nearbyint per element.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void quantize_q8(const float* x, int64_t n,
                                                                               ActivationBlockQ8* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const __m512 low = _mm512_loadu_ps(x + b * 32), high = _mm512_loadu_ps(x + b * 32 + 16);
    const __m512 max_abs = _mm512_max_ps(_mm512_abs_ps(high), _mm512_max_ps(_mm512_abs_ps(low), _mm512_setzero_ps()));
    const float amax = _mm512_reduce_max_ps(max_abs);
    const float scale = amax / 127.0f;
    const __m512 inverse = _mm512_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
    out[b].scale = scale;
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    const __m512i q_low = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(low, inverse), kRound));
    const __m512i q_high = _mm512_cvtps_epi32(_mm512_roundscale_ps(_mm512_mul_ps(high, inverse), kRound));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants), _mm512_cvtepi32_epi8(q_low));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants + 16), _mm512_cvtepi32_epi8(q_high));
  }
}

// The same values as the scalar loop: max is exact in any order, and the product, the
// rounding (to nearest, ties to even) and the clamp are the same per element.
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void quantize_q8k(const float* x, int64_t n,
                                                                                ActivationBlockQ8K* out) {
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    __m512 max_abs = _mm512_setzero_ps();
    for (int i = 0; i < 256; i += 16) max_abs = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xb + i)), max_abs);
    const float amax = _mm512_reduce_max_ps(max_abs);
    out[b].scale = amax / 127.0f;
    const __m512 inverse = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    for (int j = 0; j < 16; ++j) {
      const __m512 scaled = _mm512_mul_ps(_mm512_loadu_ps(xb + 16 * j), inverse);
      __m512i q = _mm512_cvtps_epi32(_mm512_roundscale_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants + 16 * j), _mm512_cvtepi32_epi8(q));
      out[b].block_sums[j] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
  }
}
}  // namespace tandem::avx512
