// K-quant block formats: blocks built so that every scale is exact are quantized and their
// bytes checked against encodings computed here from the GGUF layout description (and a few
// literal bytes worked out by hand); dequantizing gives the inputs back exactly. Random data
// checks the round-trip error ordering Q8_K < Q6_K < Q5_K < Q4_K.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "base/dtype.h"
#include "base/kquants.h"
#include "base/quant.h"

namespace tandem {
namespace {

// Sub-block scales and mins for the exact Q4_K/Q5_K blocks (max 63 each, so d and dmin are
// exactly the powers of two below).
constexpr uint8_t kScales[8] = {63, 1, 17, 32, 5, 40, 9, 60};
constexpr uint8_t kMins[8] = {0, 63, 10, 20, 30, 40, 50, 7};
constexpr float kD = 1.0f / 64, kDmin = 1.0f / 128;  // f16 0x2400 and 0x2000

// Element i of sub-block j: stride 7 is coprime to 16 and 32, so every level 0..nmax occurs
// (the fitted range is then exactly [-min, scale * nmax - min]).
int level(int j, int i, int levels) { return (7 * i + j) % levels; }

std::vector<float> exact_k4_values(int levels) {
  std::vector<float> x(256);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 32; ++i) x[32 * j + i] = kD * kScales[j] * level(j, i, levels) - kDmin * kMins[j];
  return x;
}

// The 12 scale bytes for kScales/kMins, worked out by hand from the layout: bytes 0-3 hold
// scales 0-3 in bits 0-5 and the top bits of scales 4-7 in bits 6-7; bytes 4-7 the same for
// mins; bytes 8-11 the low nibbles of scale (bits 0-3) and min (bits 4-7) of sub-blocks 4-7.
constexpr uint8_t kPackedScales[12] = {0x3F, 0x81, 0x11, 0xE0, 0x40, 0xBF, 0xCA, 0x14, 0xE5, 0x88, 0x29, 0x7C};

TEST(KQuantFormat, Q4KExactBlock) {
  const std::vector<float> x = exact_k4_values(16);
  BlockQ4K block;
  quantize_row_q4k(x.data(), &block, 256);
  EXPECT_EQ(block.d_f16, 0x2400);
  EXPECT_EQ(block.dmin_f16, 0x2000);
  for (int k = 0; k < 12; ++k) EXPECT_EQ(block.scales[k], kPackedScales[k]) << "scale byte " << k;
  // Chunk c of 64 elements: byte l holds element 64c+l (low nibble) and 64c+32+l (high).
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      ASSERT_EQ(block.qs[32 * c + l], level(2 * c, l, 16) | (level(2 * c + 1, l, 16) << 4)) << c << " " << l;
  EXPECT_EQ(block.qs[0], 0x10);
  EXPECT_EQ(block.qs[1], 0x87);  // levels 7 and 8

  float y[256];
  dequantize_row_q4k(&block, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i]) << i;
  // Sub-block 1 (scale 1, min 63): element 32 is level 1 -> 1/64 - 63/128.
  EXPECT_EQ(y[32], 1.0f / 64 - 63.0f / 128);
}

TEST(KQuantFormat, Q5KExactBlock) {
  const std::vector<float> x = exact_k4_values(32);
  BlockQ5K block;
  quantize_row_q5k(x.data(), &block, 256);
  EXPECT_EQ(block.d_f16, 0x2400);
  EXPECT_EQ(block.dmin_f16, 0x2000);
  for (int k = 0; k < 12; ++k) EXPECT_EQ(block.scales[k], kPackedScales[k]) << "scale byte " << k;
  for (int l = 0; l < 32; ++l) {
    int high = 0;
    for (int j = 0; j < 8; ++j) high |= (level(j, l, 32) >> 4) << j;  // bit j: sub-block j
    ASSERT_EQ(block.qh[l], high) << l;
  }
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      ASSERT_EQ(block.qs[32 * c + l], (level(2 * c, l, 32) & 15) | ((level(2 * c + 1, l, 32) & 15) << 4));
  float y[256];
  dequantize_row_q5k(&block, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i]) << i;
}

// Q6_K: d = 2^-10 (f16 0x1400); the scale -128 is the largest in magnitude, so it fixes d.
constexpr int8_t kQ6Scales[16] = {-128, 5, -7, 127, 64, -1, 33, 100, -50, 2, 90, -90, 11, 120, -3, 77};
constexpr float kQ6D = 1.0f / 1024;

// Signed level in [-32, 31] of element i of sub-block j; -32 (the largest magnitude, which
// the quantizer maps to -32 exactly) occurs once per sub-block.
int q6_level(int j, int i) { return i == 0 ? -32 : (5 * i + 3 * j) % 63 - 31; }

TEST(KQuantFormat, Q6KExactBlock) {
  std::vector<float> x(256);
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 16; ++i) x[16 * j + i] = kQ6D * kQ6Scales[j] * q6_level(j, i);
  BlockQ6K block;
  quantize_row_q6k(x.data(), &block, 256);
  EXPECT_EQ(block.d_f16, 0x1400);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(block.scales[j], kQ6Scales[j]) << j;
  auto u = [&](int e) { return q6_level(e / 16, e % 16) + 32; };  // stored 6-bit value
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const int e = 128 * h + l;
      ASSERT_EQ(block.ql[64 * h + l], (u(e) & 15) | ((u(e + 64) & 15) << 4));
      ASSERT_EQ(block.ql[64 * h + 32 + l], (u(e + 32) & 15) | ((u(e + 96) & 15) << 4));
      ASSERT_EQ(block.qh[32 * h + l],
                (u(e) >> 4) | ((u(e + 32) >> 4) << 2) | ((u(e + 64) >> 4) << 4) | ((u(e + 96) >> 4) << 6));
    }
  }
  EXPECT_EQ(block.ql[0], 0x00);  // elements 0 and 64 are both level -32 (stored 0)
  float y[256];
  dequantize_row_q6k(&block, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i]) << i;
}

TEST(KQuantFormat, Q8KExactBlock) {
  // q = 37 i mod 255 - 127 takes every value in [-127, 127]; d = 1/32 exactly.
  std::vector<float> x(256);
  std::vector<int> q(256);
  for (int i = 0; i < 256; ++i) {
    q[i] = (37 * i) % 255 - 127;
    x[i] = q[i] / 32.0f;
  }
  BlockQ8K block;
  quantize_row_q8k(x.data(), &block, 256);
  EXPECT_EQ(block.d, 1.0f / 32);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(block.qs[i], q[i]) << i;
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += q[16 * j + i];
    EXPECT_EQ(block.bsums[j], sum);
  }
  unsigned char bytes[4];
  std::memcpy(bytes, &block, 4);  // d is a little-endian f32 at offset 0: 0x3D000000
  EXPECT_EQ(bytes[3], 0x3D);
  float y[256];
  dequantize_row_q8k(&block, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i]);
}

TEST(KQuantFormat, TraitsAndRouting) {
  for (auto [type, bytes] : {std::pair{DType::Q4_K, 144}, {DType::Q5_K, 176}, {DType::Q6_K, 210}, {DType::Q8_K, 292}}) {
    EXPECT_TRUE(dtype_traits(type).supported);
    EXPECT_TRUE(dtype_is_computable(type));
    EXPECT_EQ(dtype_row_bytes(type, 512), 2 * bytes);
    // quantize_row/dequantize_row route to the k-quant code: same bytes, same values.
    std::vector<float> x = exact_k4_values(16);
    x.insert(x.end(), x.begin(), x.end());
    std::vector<unsigned char> via_quant(2 * bytes), y(2 * bytes);
    quantize_row(type, x.data(), via_quant.data(), 512);
    switch (type) {
      case DType::Q4_K: quantize_row_q4k(x.data(), reinterpret_cast<BlockQ4K*>(y.data()), 512); break;
      case DType::Q5_K: quantize_row_q5k(x.data(), reinterpret_cast<BlockQ5K*>(y.data()), 512); break;
      case DType::Q6_K: quantize_row_q6k(x.data(), reinterpret_cast<BlockQ6K*>(y.data()), 512); break;
      default: quantize_row_q8k(x.data(), reinterpret_cast<BlockQ8K*>(y.data()), 512); break;
    }
    EXPECT_EQ(via_quant, y) << dtype_name(type);
  }
}

TEST(KQuantFormat, ZeroAndConstantBlocks) {
  for (DType type : {DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K}) {
    for (float value : {0.0f, -0.75f, 0.5f}) {
      std::vector<float> x(256, value), y(256);
      std::vector<unsigned char> bytes(dtype_row_bytes(type, 256));
      quantize_row(type, x.data(), bytes.data(), 256);
      dequantize_row(type, bytes.data(), y.data(), 256);
      for (int i = 0; i < 256; ++i) ASSERT_NEAR(y[i], value, 0.002f) << dtype_name(type) << " value " << value;
    }
  }
}

double relative_rms_error(DType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<unsigned char> bytes(dtype_row_bytes(type, n));
  std::vector<float> y(n);
  quantize_row(type, x.data(), bytes.data(), n);
  dequantize_row(type, bytes.data(), y.data(), n);
  double err = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

TEST(KQuantFormat, RoundTripErrorOrdering) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(64 * 256);
  for (float& v : x) v = normal(rng);
  for (size_t i = 0; i < x.size(); i += 97) x[i] *= 6.0f;  // a few outliers, as in real weights
  const double q4 = relative_rms_error(DType::Q4_K, x), q5 = relative_rms_error(DType::Q5_K, x);
  const double q6 = relative_rms_error(DType::Q6_K, x), q8 = relative_rms_error(DType::Q8_K, x);
  std::printf("relative rms error: Q4_K %.4f  Q5_K %.4f  Q6_K %.4f  Q8_K %.4f\n", q4, q5, q6, q8);
  EXPECT_LT(q4, 0.12);
  EXPECT_LT(q5, 0.06);
  EXPECT_LT(q6, 0.03);
  EXPECT_LT(q8, 0.02);  // one scale per 256: the outliers cost Q8_K most
  EXPECT_LT(q5, 0.6 * q4);
  EXPECT_LT(q6, 0.6 * q5);
  EXPECT_LT(q8, q6);
}

}  // namespace
}  // namespace tandem
