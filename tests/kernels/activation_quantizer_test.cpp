// The activation quantizers (kernels/dot.h for 32-element blocks, kernels/dot_kquants.h for
// 256-element blocks): every ISA variant writes the same bytes as the scalar one, including
// ties, zeros, tiny and huge values — the kernels' bit-identity rests on it.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"

namespace tandem {
namespace {

std::vector<float> random_floats(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = normal(rng);
  return values;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// The activation quantizer's variants write the same bytes (the AVX-512 one feeds the
// AMX kernel, the scalar one is the reference), including ties, zeros and huge values.
TEST(QuantizeActivationsQ8K, EveryVariantWritesTheSameBytes) {
  std::mt19937 rng(5);
  for (float scale : {0.0f, 1e-30f, 1.0f, 3e4f}) {
    std::vector<float> x = random_floats(rng, 1024, scale);
    x[3] = 127.0f * 0.5f;  // exact ties once the block maximum is 127
    x[17] = -127.0f;
    x[40] = 127.0f;
    x[300] = 2.5f;
    std::vector<ActivationBlockQ8K> expected(4), got(4);
    quantize_activations_q8k_isa(Isa::Scalar, x.data(), 1024, expected.data());
    for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Amx}) {
      if (static_cast<int>(isa) > static_cast<int>(detect_isa())) continue;
      quantize_activations_q8k_isa(isa, x.data(), 1024, got.data());
      for (size_t b = 0; b < 4; ++b) {
        EXPECT_TRUE(same_bits(got[b].scale, expected[b].scale));
        EXPECT_EQ(std::memcmp(got[b].quants, expected[b].quants, 256), 0) << "block " << b << " scale " << scale;
        EXPECT_EQ(std::memcmp(got[b].block_sums, expected[b].block_sums, 32), 0) << "block " << b;
      }
    }
  }
}

// The same for the 32-element blocks of Q8_0/Q4_0 weights.
TEST(QuantizeActivationsQ8, EveryVariantWritesTheSameBytes) {
  std::mt19937 rng(6);
  for (float scale : {0.0f, 1e-30f, 1.0f, 3e4f}) {
    std::vector<float> x = random_floats(rng, 320, scale);
    x[3] = 127.0f * 0.5f;
    x[17] = -127.0f;
    x[31] = 127.0f;
    x[40] = 2.5f;
    std::vector<ActivationBlockQ8> expected(10), got(10);
    quantize_activations_q8_isa(Isa::Scalar, x.data(), 320, expected.data());
    for (Isa isa : {Isa::Avx2, Isa::Avx512, Isa::Amx}) {
      if (static_cast<int>(isa) > static_cast<int>(detect_isa())) continue;
      quantize_activations_q8_isa(isa, x.data(), 320, got.data());
      for (size_t b = 0; b < 10; ++b) {
        EXPECT_TRUE(same_bits(got[b].scale, expected[b].scale));
        EXPECT_EQ(std::memcmp(got[b].quants, expected[b].quants, 32), 0) << "block " << b << " scale " << scale;
      }
    }
  }
}

}  // namespace
}  // namespace tandem
