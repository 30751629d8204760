// The AVX-512 instruction loops of kernels/instruction_peak.h: 12 independent 16-lane
// accumulators, more than an FMA's latency times its issue rate on any core we met (4 cycles
// x 2 pipes), so the loop runs at the instruction's throughput, not its latency.
#include "kernels/simd_intrinsics.h"

#include "kernels/avx512/avx512_kernels.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512bf16,avx512vnni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512bf16,avx512vnni")
#endif

namespace tandem::avx512 {
namespace {

constexpr int kAccumulators = 12;

double sum_lanes(const __m512 (&acc)[kAccumulators]) {
  double sum = 0.0;
  for (const __m512& a : acc) sum += _mm512_reduce_add_ps(a);
  return sum;
}

}  // namespace

InstructionLoop fma_f32_loop(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  __m512 factor = _mm512_set1_ps(1.0f);
  const __m512 half = _mm512_set1_ps(0.5f);
  // Hidden from the optimiser, so 1 x 0.5 stays a multiply-add and is not folded into an add.
  asm volatile("" : "+v"(factor));
  for (int64_t i = 0; i < iterations; ++i)
    for (__m512& a : acc) a = _mm512_fmadd_ps(factor, half, a);
  return {iterations * kAccumulators * 16 * 2, sum_lanes(acc)};
}

InstructionLoop dot_bf16_loop(int64_t iterations) {
  __m512 acc[kAccumulators];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  // bf16 1.0 and 0.25 in every pair: each lane adds 1 x 0.25 twice per instruction.
  __m512i ones = _mm512_set1_epi16(0x3F80);
  const __m512i quarters = _mm512_set1_epi16(0x3E80);
  asm volatile("" : "+v"(ones));
  for (int64_t i = 0; i < iterations; ++i)
    for (__m512& a : acc)
      a = _mm512_dpbf16_ps(a, reinterpret_cast<__m512bh>(ones), reinterpret_cast<__m512bh>(quarters));
  return {iterations * kAccumulators * 32 * 2, sum_lanes(acc)};
}

// vpdpbusd of bytes 1 (unsigned) and 1 (signed): each int32 lane adds four products of 1 a
// round (the level requires AVX512_VNNI; its integer GEMMs are built on this instruction).
InstructionLoop dot_i8_loop(int64_t iterations) {
  __m512i acc[kAccumulators];
  for (__m512i& a : acc) a = _mm512_setzero_si512();
  __m512i weights = _mm512_set1_epi8(1);
  const __m512i activations = _mm512_set1_epi8(1);
  asm volatile("" : "+v"(weights));
  for (int64_t i = 0; i < iterations; ++i)
    for (__m512i& a : acc) a = _mm512_dpbusd_epi32(a, weights, activations);
  double sum = 0.0;
  for (const __m512i& a : acc) sum += static_cast<double>(_mm512_reduce_add_epi32(a));
  return {iterations * kAccumulators * 64 * 2, sum};
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
