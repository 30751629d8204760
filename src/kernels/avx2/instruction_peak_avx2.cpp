// The AVX2 instruction loops of kernels/instruction_peak.h: 12 independent accumulators,
// more than an FMA's latency times its issue rate (4 cycles x 2 pipes), so each loop runs at
// the instruction's throughput.
#include "kernels/simd_intrinsics.h"

#include "kernels/avx2/avx2_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace tandem::avx2 {

InstructionLoop fma_f32_loop(int64_t iterations) {
  constexpr int kAccumulators = 12;
  __m256 acc[kAccumulators];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  __m256 factor = _mm256_set1_ps(1.0f);
  const __m256 half = _mm256_set1_ps(0.5f);
  // Hidden from the optimiser, so 1 x 0.5 stays a multiply-add and is not folded into an add.
  asm volatile("" : "+x"(factor));
  for (int64_t i = 0; i < iterations; ++i)
    for (__m256& a : acc) a = _mm256_fmadd_ps(factor, half, a);
  double sum = 0.0;
  for (const __m256& a : acc) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, a);
    for (const float lane : lanes) sum += lane;
  }
  return {iterations * kAccumulators * 8 * 2, sum};
}

// vpmaddubsw of bytes 1 (unsigned) and 1 (signed): each int16 lane gets 1 + 1 = 2 and vpaddw
// adds it to its accumulator (int16: exact up to 16383 rounds; longer timing loops wrap, which
// costs nothing). The issue rate of the pair is the AVX2 integer GEMMs' ceiling: their
// inner loops are these two instructions plus the weights' unpacking.
InstructionLoop dot_i8_loop(int64_t iterations) {
  constexpr int kAccumulators = 12;
  __m256i acc[kAccumulators];
  for (__m256i& a : acc) a = _mm256_setzero_si256();
  __m256i weights = _mm256_set1_epi8(1);
  const __m256i activations = _mm256_set1_epi8(1);
  asm volatile("" : "+x"(weights));  // not a constant the optimiser can fold
  for (int64_t i = 0; i < iterations; ++i)
    for (__m256i& a : acc) a = _mm256_add_epi16(a, _mm256_maddubs_epi16(weights, activations));
  double sum = 0.0;
  for (const __m256i& a : acc) {
    alignas(32) int16_t lanes[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a);
    for (const int16_t lane : lanes) sum += lane;
  }
  return {iterations * kAccumulators * 32 * 2, sum};
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
