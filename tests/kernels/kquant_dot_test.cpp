// K-quant dot kernels: each variant (scalar, AVX2, AVX-512 VNNI, whichever this CPU runs)
// against a double-precision dot of the dequantized weights and dequantized activations, and
// every SIMD variant bit-identical to the scalar reference, on quantized random rows and on
// random block bytes (every bit pattern, extreme quants) for several row lengths.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/half.h"
#include "base/quant.h"
#include "kernels/dot_kquants.h"

namespace tandem {
namespace {

constexpr DType kTypes[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K,  DType::Q8_K,
                            DType::Q2_K, DType::Q3_K, DType::IQ4_XS};
constexpr int64_t kLengths[] = {256, 512, 2816};
constexpr Isa kIsas[] = {Isa::Scalar, Isa::Avx2, Isa::Avx512};

struct Rows {
  std::vector<unsigned char> weight;
  std::vector<ActivationBlockQ8K> activations;
};

Rows quantized_rows(DType type, int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(n), x(n);
  for (float& v : w) v = 0.05f * normal(rng);
  for (float& v : x) v = normal(rng);
  Rows rows{std::vector<unsigned char>(dtype_row_bytes(type, n)), std::vector<ActivationBlockQ8K>(n / 256)};
  quantize_row(type, w.data(), rows.weight.data(), n);
  quantize_activations_q8k(x.data(), n, rows.activations.data());
  return rows;
}

// Random bytes for every field, with the float scales replaced by finite values: covers quants
// at their extremes (15, 31, 63), 6-bit scales of 63 and int8 scales of -128; Q2_K/Q3_K/IQ4_XS
// scales and mins of every 4- and 6-bit value, every IQ4 index.
Rows random_byte_rows(DType type, int64_t n, std::mt19937& rng) {
  Rows rows{std::vector<unsigned char>(dtype_row_bytes(type, n)), std::vector<ActivationBlockQ8K>(n / 256)};
  for (unsigned char& byte : rows.weight) byte = static_cast<unsigned char>(rng());
  const int64_t block_bytes = dtype_traits(type).block_bytes;
  std::uniform_real_distribution<float> scale(-0.01f, 0.01f);
  for (int64_t b = 0; b < n / 256; ++b) {
    unsigned char* block = rows.weight.data() + b * block_bytes;
    const uint16_t d = f32_to_f16(scale(rng)), dmin = f32_to_f16(scale(rng));
    const float d32 = scale(rng);
    switch (type) {
      case DType::Q4_K:
      case DType::Q5_K:
        std::memcpy(block, &d, 2);
        std::memcpy(block + 2, &dmin, 2);
        break;
      case DType::Q6_K: std::memcpy(block + 208, &d, 2); break;
      case DType::Q2_K:
        std::memcpy(block + 80, &d, 2);
        std::memcpy(block + 82, &dmin, 2);
        break;
      case DType::Q3_K: std::memcpy(block + 108, &d, 2); break;
      case DType::IQ4_XS: std::memcpy(block, &d, 2); break;
      default: std::memcpy(block, &d32, 4); break;
    }
  }
  std::uniform_int_distribution<int> quant(-127, 127);
  for (int64_t b = 0; b < n / 256; ++b) {
    ActivationBlockQ8K& a = rows.activations[b];
    a.scale = 0.01f + 0.001f * static_cast<float>(b);
    for (int i = 0; i < 256; ++i) a.quants[i] = static_cast<int8_t>(b % 3 == 0 ? (i % 2 ? 127 : -127) : quant(rng));
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += a.quants[16 * j + i];
      a.block_sums[j] = static_cast<int16_t>(sum);
    }
  }
  return rows;
}

// sum over i of dequantized weight * (scale * quant), in double; also sum of |terms|.
std::pair<double, double> reference_dot(DType type, const Rows& rows, int64_t n) {
  std::vector<float> w(n);
  dequantize_row(type, rows.weight.data(), w.data(), n);
  double dot = 0, magnitude = 0;
  for (int64_t i = 0; i < n; ++i) {
    const ActivationBlockQ8K& a = rows.activations[i / 256];
    const double term = double(w[i]) * (double(a.scale) * a.quants[i % 256]);
    dot += term;
    magnitude += std::fabs(term);
  }
  return {dot, magnitude};
}

void check_all_variants(DType type, const Rows& rows, int64_t n) {
  const auto [expected, magnitude] = reference_dot(type, rows, n);
  const float scalar = dot_q8k_activations_isa(Isa::Scalar, type, rows.weight.data(), rows.activations.data(), n);
  for (Isa isa : kIsas) {
    if (static_cast<int>(isa) > static_cast<int>(detect_isa())) continue;
    const float got = dot_q8k_activations_isa(isa, type, rows.weight.data(), rows.activations.data(), n);
    EXPECT_NEAR(got, expected, 1e-6 * magnitude + 1e-30) << dtype_name(type) << " n=" << n << " " << isa_name(isa);
    // Same int32 sums and the same float update per block: the same bits.
    EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(scalar))
        << dtype_name(type) << " n=" << n << " " << isa_name(isa) << " " << got << " vs " << scalar;
  }
  const float dispatched = dot_q8k_activations(type, rows.weight.data(), rows.activations.data(), n);
  EXPECT_EQ(std::bit_cast<uint32_t>(dispatched), std::bit_cast<uint32_t>(scalar));
}

TEST(KQuantDot, QuantizedRowsAllVariants) {
  std::printf("best ISA on this CPU: %s\n", std::string(isa_name(detect_isa())).c_str());
  std::mt19937 rng(11);
  for (DType type : kTypes)
    for (int64_t n : kLengths)
      for (int trial = 0; trial < 4; ++trial) check_all_variants(type, quantized_rows(type, n, rng), n);
}

TEST(KQuantDot, RandomBlockBytesAllVariants) {
  std::mt19937 rng(12);
  for (DType type : kTypes)
    for (int64_t n : kLengths)
      for (int trial = 0; trial < 4; ++trial) check_all_variants(type, random_byte_rows(type, n, rng), n);
}

// The quantized dot product approximates the float one: activation quantization error only.
TEST(KQuantDot, CloseToFloatDot) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 2816;
  for (DType type : kTypes) {
    std::vector<float> w(n), x(n), wq(n);
    for (float& v : w) v = normal(rng);
    for (float& v : x) v = normal(rng);
    std::vector<unsigned char> bytes(dtype_row_bytes(type, n));
    quantize_row(type, w.data(), bytes.data(), n);
    dequantize_row(type, bytes.data(), wq.data(), n);
    std::vector<ActivationBlockQ8K> a(n / 256);
    quantize_activations_q8k(x.data(), n, a.data());
    double exact = 0;
    for (int64_t i = 0; i < n; ++i) exact += double(wq[i]) * x[i];
    const float got = dot_q8k_activations(type, bytes.data(), a.data(), n);
    EXPECT_NEAR(got, exact, 0.01 * std::sqrt(double(n)) * 3) << dtype_name(type);
  }
}

TEST(KQuantDot, ActivationQuantization) {
  std::vector<float> x(512);
  for (int i = 0; i < 512; ++i) x[i] = static_cast<float>((i * 37) % 255 - 127) / 64.0f;
  std::vector<ActivationBlockQ8K> a(2);
  quantize_activations_q8k(x.data(), 512, a.data());
  for (int b = 0; b < 2; ++b) {
    EXPECT_EQ(a[b].scale, 1.0f / 64);
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) {
        const int e = 256 * b + 16 * j + i;
        EXPECT_EQ(a[b].quants[16 * j + i], (e * 37) % 255 - 127);
        sum += a[b].quants[16 * j + i];
      }
      EXPECT_EQ(a[b].block_sums[j], sum);
    }
  }
  std::vector<float> zeros(256, 0.0f);
  quantize_activations_q8k(zeros.data(), 256, a.data());
  EXPECT_EQ(a[0].scale, 0.0f);
  EXPECT_EQ(a[0].block_sums[3], 0);
}

}  // namespace
}  // namespace tandem
