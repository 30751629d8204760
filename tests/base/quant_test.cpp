// F16/BF16 conversions and the Q8_0/Q4_0 reference quantizers, checked against bit patterns
// and values worked out by hand (not by calling the code under test a second way).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/half.h"
#include "base/quant.h"

namespace tandem {
namespace {

TEST(Half, ExactValues) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);               // largest half
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  // Every half survives a round trip through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<uint16_t>(h);
    if ((half & 0x7c00) == 0x7c00 && (half & 0x03ff) != 0) continue;  // nan payloads
    ASSERT_EQ(f32_to_f16(f16_to_f32(half)), half) << std::hex << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  const float ulp = std::ldexp(1.0f, -10);            // spacing of halves in [1, 2)
  EXPECT_EQ(f32_to_f16(1.0f + ulp / 2), 0x3c00);      // tie, 1.0 is even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * ulp / 2), 0x3c02);  // tie, rounds up to even
  EXPECT_EQ(f32_to_f16(1.0f + ulp * 0.51f), 0x3c01);  // above the tie
  EXPECT_EQ(f32_to_f16(1.0f + ulp * 0.49f), 0x3c00);  // below the tie
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);            // below the overflow tie
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);            // tie rounds to even: infinity
}

TEST(Half, InfinityAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16(inf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-inf), 0xfc00);
  EXPECT_EQ(f32_to_f16(1e10f), 0x7c00);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  const uint16_t nan = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(nan)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
}

TEST(Half, Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest subnormal half
  EXPECT_EQ(f16_to_f32(0x0001), tiny);
  EXPECT_EQ(f16_to_f32(0x03ff), 1023 * tiny);
  EXPECT_EQ(f16_to_f32(0x8001), -tiny);
  EXPECT_EQ(f32_to_f16(tiny), 0x0001);
  EXPECT_EQ(f32_to_f16(5 * tiny), 0x0005);
  EXPECT_EQ(f32_to_f16(tiny / 2), 0x0000);      // tie, rounds to even zero
  EXPECT_EQ(f32_to_f16(3 * tiny / 2), 0x0002);  // tie, rounds to even 2
  EXPECT_EQ(f32_to_f16(tiny * 0.51f), 0x0001);
  EXPECT_EQ(f32_to_f16(-tiny), 0x8001);
  EXPECT_EQ(f32_to_f16(1023.5f * tiny), 0x0400);  // tie rounds up into the normals
  EXPECT_EQ(f32_to_f16(1e-10f), 0x0000);
}

TEST(BFloat16, ExactRoundingAndSpecials) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  const float ulp = std::ldexp(1.0f, -7);
  EXPECT_EQ(f32_to_bf16(1.0f + ulp / 2), 0x3f80);      // tie to even (down)
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * ulp / 2), 0x3f82);  // tie to even (up)
  EXPECT_EQ(f32_to_bf16(1.0f + ulp * 0.75f), 0x3f81);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_bf16(inf), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-inf), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  // A nan whose payload sits only in the dropped bits must stay nan, not become inf.
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
  // Subnormals are ordinary for bf16 (same exponent range as float).
  EXPECT_EQ(f32_to_bf16(std::ldexp(1.0f, -130)), 0x0008);
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));
}

TEST(QuantizeRow, Q8_0ScaleOneStoresTheValues) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i * 8 - 127 + (i == 31 ? 2 : 0));
  // x runs -127, -119, ..., 113, 123: max |x| is 127, so d = 1 and q = x.
  std::vector<uint8_t> bytes(34);
  quantize_row(DType::Q8_0, x.data(), bytes.data(), 32);
  EXPECT_EQ(bytes[0], 0x00);  // f16 1.0 = 0x3c00, little-endian
  EXPECT_EQ(bytes[1], 0x3c);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(static_cast<int8_t>(bytes[2 + i]), x[i]) << i;
  std::vector<float> back(32);
  dequantize_row(DType::Q8_0, bytes.data(), back.data(), 32);
  EXPECT_EQ(back, x);
}

TEST(QuantizeRow, Q8_0GeneralBlocks) {
  // Block 0: max |x| = 2.54 → d = 0.02; x / d = i * 10/3 - 50 is never near a rounding tie.
  // Block 1: all zero → d = 0, q = 0.
  std::vector<float> x(64, 0.0f);
  for (int i = 0; i < 32; ++i) x[i] = 0.02f * (static_cast<float>(i) * (10.0f / 3) - 50.0f);
  x[7] = -2.54f;
  std::vector<uint8_t> bytes(68);
  quantize_row(DType::Q8_0, x.data(), bytes.data(), 64);
  uint16_t scale;
  std::memcpy(&scale, bytes.data(), 2);
  EXPECT_EQ(scale, f32_to_f16(0.02f));
  std::vector<float> back(64);
  dequantize_row(DType::Q8_0, bytes.data(), back.data(), 64);
  const double d = f16_to_f32(scale);
  for (int i = 0; i < 32; ++i) {
    const long q = std::lround(x[i] / 0.02);
    EXPECT_EQ(static_cast<int8_t>(bytes[2 + i]), q) << i;
    EXPECT_FLOAT_EQ(back[i], static_cast<float>(d * q)) << i;
    EXPECT_NEAR(back[i], x[i], 0.011) << i;
  }
  EXPECT_EQ(bytes[34], 0);
  EXPECT_EQ(bytes[35], 0);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(bytes[34 + 2 + i - 32], 0);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(back[i], 0.0f);
}

TEST(QuantizeRow, Q4_0NegativeExtremeGivesScaleOne) {
  // Extreme -8 → d = -8 / -8 = 1; integer x in [-8, 7] maps to nibble x + 8.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>((i * 5) % 16 - 8);
  x[0] = -8.0f;
  std::vector<uint8_t> bytes(18);
  quantize_row(DType::Q4_0, x.data(), bytes.data(), 32);
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[1], 0x3c);
  for (int i = 0; i < 16; ++i) {
    const int low = static_cast<int>(x[i]) + 8, high = static_cast<int>(x[i + 16]) + 8;
    EXPECT_EQ(bytes[2 + i], low | (high << 4)) << i;
  }
  std::vector<float> back(32);
  dequantize_row(DType::Q4_0, bytes.data(), back.data(), 32);
  EXPECT_EQ(back, x);
}

TEST(QuantizeRow, Q4_0PositiveExtremeClampsTheFarEnd) {
  // Extreme +8 → d = -1: x = 8 → nibble 0; x = -8 would be nibble 16, clamped to 15 (= -7).
  std::vector<float> x(32, 0.0f);
  x[0] = 8.0f;
  x[1] = -8.0f;
  x[2] = 3.0f;
  x[17] = -5.0f;
  std::vector<uint8_t> bytes(18);
  quantize_row(DType::Q4_0, x.data(), bytes.data(), 32);
  EXPECT_EQ(bytes[0], 0x00);  // f16 -1.0 = 0xbc00
  EXPECT_EQ(bytes[1], 0xbc);
  EXPECT_EQ(bytes[2 + 0], 0x0 | (8 << 4));  // x[0] = 8 → 0; x[16] = 0 → 8
  EXPECT_EQ(bytes[2 + 1], 15 | (13 << 4));  // x[1] = -8 → 15 (clamped); x[17] = -5 → 13
  EXPECT_EQ(bytes[2 + 2], 5 | (8 << 4));    // x[2] = 3 → 5
  std::vector<float> back(32);
  dequantize_row(DType::Q4_0, bytes.data(), back.data(), 32);
  EXPECT_EQ(back[0], 8.0f);
  EXPECT_EQ(back[1], -7.0f);
  EXPECT_EQ(back[2], 3.0f);
  EXPECT_EQ(back[17], -5.0f);
}

TEST(QuantizeRow, Q4_0ZeroBlock) {
  std::vector<float> x(32, 0.0f);
  std::vector<uint8_t> bytes(18, 0xff);
  quantize_row(DType::Q4_0, x.data(), bytes.data(), 32);
  uint16_t scale;
  std::memcpy(&scale, bytes.data(), 2);
  EXPECT_EQ(scale & 0x7fff, 0);  // d = 0 / -8 is -0.0: either zero is fine
  for (int i = 0; i < 16; ++i) EXPECT_EQ(bytes[2 + i], 0x88);
}

TEST(QuantizeRow, HalfAndBFloat16Rows) {
  const std::vector<float> x = {1.0f, -2.0f, 0.5f, 65504.0f};
  std::vector<uint16_t> half(4), bf(4);
  quantize_row(DType::F16, x.data(), half.data(), 4);
  EXPECT_EQ(half, (std::vector<uint16_t>{0x3c00, 0xc000, 0x3800, 0x7bff}));
  quantize_row(DType::BF16, x.data(), bf.data(), 4);
  EXPECT_EQ(bf, (std::vector<uint16_t>{0x3f80, 0xc000, 0x3f00, 0x4780}));
  std::vector<float> back(4);
  dequantize_row(DType::F16, half.data(), back.data(), 4);
  EXPECT_EQ(back, x);
  dequantize_row(DType::BF16, bf.data(), back.data(), 4);
  EXPECT_EQ(back, (std::vector<float>{1.0f, -2.0f, 0.5f, 65536.0f}));
  std::vector<float> copy(4);
  quantize_row(DType::F32, x.data(), copy.data(), 4);
  EXPECT_EQ(copy, x);
}

}  // namespace
}  // namespace tandem
