// AVX2 convert_kv_rows: stored K/V rows (F16, BF16, Q8_0, Q4_0) to floats, 8 elements per
// vector, for the attention kernel's per-block scratch. Every value is the one dequantize_row
// gives: half -> float and bf16 -> float are exact, and a block value is the one product
// scale · q, rounded once, as there.
#include "kernels/simd_intrinsics.h"

#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "base/error.h"
#include "base/half.h"
#include "kernels/avx2/avx2_kernels.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace tandem::avx2 {
namespace {

constexpr int kLanes = 8;

void convert_f16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void convert_bf16(const uint16_t* src, int64_t n, float* dst) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16)));
  }
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void convert_q8_0(const BlockQ8_0* blocks, int64_t n, float* dst) {
  for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const __m256 scale = _mm256_set1_ps(f16_to_f32(blocks[b].scale_f16));
    for (int q = 0; q < 4; ++q) {
      const __m128i quants = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blocks[b].quants + kLanes * q));
      _mm256_storeu_ps(dst + b * kQ8_0BlockSize + kLanes * q,
                       _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(quants))));
    }
  }
}

// Byte i of a block holds element i (low nibble) and element i + 16 (high nibble).
void convert_q4_0(const BlockQ4_0* blocks, int64_t n, float* dst) {
  const __m256i low_nibble = _mm256_set1_epi32(0x0f), eight = _mm256_set1_epi32(8);
  for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
    const __m256 scale = _mm256_set1_ps(f16_to_f32(blocks[b].scale_f16));
    float* out = dst + b * kQ4_0BlockSize;
    for (int h = 0; h < 2; ++h) {
      const __m256i bytes =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blocks[b].nibbles + kLanes * h)));
      const __m256i low = _mm256_sub_epi32(_mm256_and_si256(bytes, low_nibble), eight);
      const __m256i high = _mm256_sub_epi32(_mm256_srli_epi32(bytes, 4), eight);
      _mm256_storeu_ps(out + kLanes * h, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(low)));
      _mm256_storeu_ps(out + 16 + kLanes * h, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(high)));
    }
  }
}

}  // namespace

void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out) {
  const int64_t offset_bytes = kv_row_offset_bytes(rows.type, element_offset);
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* src = rows.data + row_offsets[r] + offset_bytes;
    float* dst = out + r * n;
    switch (rows.type) {
      case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
      case DType::F16: convert_f16(reinterpret_cast<const uint16_t*>(src), n, dst); break;
      case DType::BF16: convert_bf16(reinterpret_cast<const uint16_t*>(src), n, dst); break;
      case DType::Q8_0:
        TANDEM_ASSERT(n % kQ8_0BlockSize == 0);
        convert_q8_0(reinterpret_cast<const BlockQ8_0*>(src), n, dst);
        break;
      case DType::Q4_0:
        TANDEM_ASSERT(n % kQ4_0BlockSize == 0);
        convert_q4_0(reinterpret_cast<const BlockQ4_0*>(src), n, dst);
        break;
      default: TANDEM_ASSERT(false && "convert_kv_rows: not a KV cache type");
    }
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
