// Q2_K, Q3_K and IQ4_XS block formats: blocks built so that every scale is exact are
// quantized and their bytes checked against encodings computed here from the GGUF layout
// description and against literal bytes worked out by hand; dequantizing gives the inputs back
// exactly. Random data checks the round-trip error ordering IQ4_XS < Q3_K < Q2_K.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "base/dtype.h"
#include "base/kquants_low_bit.h"
#include "base/quant.h"

namespace tandem {
namespace {

// ---- Q2_K: d = 1/64 (f16 0x2400), dmin = 1/128 (0x2000); scale and min 15 both occur. ----
constexpr uint8_t kQ2Scales[16] = {15, 1, 7, 3, 9, 12, 2, 14, 5, 8, 11, 4, 13, 6, 10, 15};
constexpr uint8_t kQ2Mins[16] = {0, 15, 3, 8, 1, 0, 12, 7, 9, 2, 15, 5, 4, 11, 6, 10};

// Level of element i of sub-block j: stride 7 is coprime to 4, so 0..3 all occur.
int q2_level(int j, int i) { return (7 * i + j) % 4; }

TEST(LowBitKQuantFormat, Q2KExactBlock) {
  std::vector<float> x(256);
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 16; ++i) x[16 * j + i] = kQ2Scales[j] / 64.0f * q2_level(j, i) - kQ2Mins[j] / 128.0f;
  BlockQ2K block;
  quantize_row_q2k(x.data(), &block, 256);
  EXPECT_EQ(block.d_f16, 0x2400);
  EXPECT_EQ(block.dmin_f16, 0x2000);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(block.scales[j], kQ2Scales[j] | (kQ2Mins[j] << 4)) << j;
  EXPECT_EQ(block.scales[1], 0xF1);  // scale 1, min 15
  // Element 128h + 32k + l is bits 2k..2k+1 of qs[32h + l].
  auto level = [](int e) { return q2_level(e / 16, e % 16); };
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      int expected = 0;
      for (int k = 0; k < 4; ++k) expected |= level(128 * h + 32 * k + l) << (2 * k);
      ASSERT_EQ(block.qs[32 * h + l], expected) << h << " " << l;
    }
  // By hand: qs[0] holds elements 0, 32, 64, 96 (levels 0, 2, 0, 2); qs[1] elements 1, 33,
  // 65, 97 (levels 3, 1, 3, 1).
  EXPECT_EQ(block.qs[0], 0x88);
  EXPECT_EQ(block.qs[1], 0x77);
  unsigned char bytes[84];
  std::memcpy(bytes, &block, 84);
  EXPECT_EQ(bytes[80], 0x00);  // d little-endian at offset 80, dmin at 82
  EXPECT_EQ(bytes[81], 0x24);
  EXPECT_EQ(bytes[83], 0x20);

  float y[256];
  dequantize_row_q2k(&block, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i]) << i;
}

// ---- Q3_K: d = 1/512 (f16 0x1800); the scale -32 is the largest in magnitude. ----
constexpr int8_t kQ3Scales[16] = {-32, 5, -7, 31, 16, -1, 9, 20, -15, 2, 27, -26, 11, 30, -3, 7};

// Signed level in [-4, 3] of element i of sub-block j; -4 (the largest magnitude, which the
// quantizer maps onto exactly) occurs in every sub-block.
int q3_level(int j, int i) { return i == 0 ? -4 : (5 * i + 3 * j) % 8 - 4; }

// The 12 scale bytes of kQ3Scales, worked out by hand: stored s + 32 = {0, 37, 25, 63, 48, 31,
// 41, 52, 17, 34, 59, 6, 43, 62, 29, 39}; bytes 0-7 hold the low nibbles of scales 0-7 (bits
// 0-3) and 8-15 (bits 4-7), bytes 8-11 the top two bits of scales m, m+4, m+8, m+12.
constexpr uint8_t kQ3PackedScales[12] = {0x10, 0x25, 0xB9, 0x6F, 0xB0, 0xEF, 0xD9, 0x74, 0x9C, 0xE6, 0x79, 0x8F};

TEST(LowBitKQuantFormat, Q3KExactBlock) {
  std::vector<float> x(256);
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 16; ++i) x[16 * j + i] = kQ3Scales[j] / 512.0f * q3_level(j, i);
  BlockQ3K block;
  quantize_row_q3k(x.data(), &block, 256);
  EXPECT_EQ(block.d_f16, 0x1800);
  for (int k = 0; k < 12; ++k) EXPECT_EQ(block.scales[k], kQ3PackedScales[k]) << "scale byte " << k;
  // The same bytes from the layout rule, and the decoder gives the scales back.
  uint8_t packed[12] = {};
  for (int j = 0; j < 16; ++j) {
    const int u = kQ3Scales[j] + 32;
    packed[j % 8] |= static_cast<uint8_t>((u & 15) << (j < 8 ? 0 : 4));
    packed[8 + j % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (j / 4)));
  }
  EXPECT_EQ(std::memcmp(packed, kQ3PackedScales, 12), 0);
  int8_t scales[16];
  unpack_q3k_scales(block.scales, scales);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(scales[j], kQ3Scales[j]) << j;

  // u = q + 4: low two bits as Q2_K's quants, bit 2 of element 128h + 32k + l in bit 4h + k of hmask[l].
  auto u = [](int e) { return q3_level(e / 16, e % 16) + 4; };
  for (int l = 0; l < 32; ++l) {
    int high = 0;
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) high |= (u(128 * h + 32 * k + l) >> 2) << (4 * h + k);
    ASSERT_EQ(block.hmask[l], high) << l;
    for (int h = 0; h < 2; ++h) {
      int low = 0;
      for (int k = 0; k < 4; ++k) low |= (u(128 * h + 32 * k + l) & 3) << (2 * k);
      ASSERT_EQ(block.qs[32 * h + l], low) << h << " " << l;
    }
  }
  // By hand: elements 1, 33, 65, 97 have q = 1, -1, -3, 3 (u = 5, 3, 1, 7): low bits 1, 3, 1, 3;
  // with elements 129, 161, 193, 225 (u = 5, 3, 1, 7) the high bits of hmask[1] are 1,0,0,1,1,0,0,1.
  EXPECT_EQ(block.qs[1], 0xDD);
  EXPECT_EQ(block.hmask[1], 0x99);
  EXPECT_EQ(block.qs[0], 0x00);  // elements 0, 32, 64, 96 are all -4
  unsigned char bytes[110];
  std::memcpy(bytes, &block, 110);
  EXPECT_EQ(bytes[96], 0x10);  // scales at offset 96, d at 108
  EXPECT_EQ(bytes[109], 0x18);

  float y[256];
  dequantize_row_q3k(&block, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i]) << i;
}

// ---- IQ4_XS: d = 1/256 (f16 0x1C00); sub-block scales s with ls = s + 32. ----
constexpr int8_t kIq4Scales[8] = {-32, 5, 31, -1, 17, -20, 9, -7};
constexpr int8_t kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Index of element i (< 32) of sub-block j; index 0 (level -127, the largest magnitude) first.
int iq4_index(int j, int i) { return i == 0 ? 0 : (5 * i + 3 * j + i / 16) % 16; }

TEST(LowBitKQuantFormat, Iq4XsExactBlock) {
  for (int i = 0; i < 16; ++i) EXPECT_EQ(kIq4NonLinear[i], kLevels[i]);
  std::vector<float> x(256);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 32; ++i) x[32 * j + i] = kIq4Scales[j] / 256.0f * kLevels[iq4_index(j, i)];
  BlockIQ4XS block;
  quantize_row_iq4xs(x.data(), &block, 256);
  EXPECT_EQ(block.d_f16, 0x1C00);
  // By hand: ls = {0, 37, 63, 31, 49, 12, 41, 25}; low nibbles {0, 5, 15, 15, 1, 12, 9, 9}
  // pairwise into scales_l, top bits {0, 2, 3, 1, 3, 0, 2, 1} at bits 2j of scales_h.
  EXPECT_EQ(block.scales_l[0], 0x50);
  EXPECT_EQ(block.scales_l[1], 0xFF);
  EXPECT_EQ(block.scales_l[2], 0xC1);
  EXPECT_EQ(block.scales_l[3], 0x99);
  EXPECT_EQ(block.scales_h, 0x6378);
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 16; ++i)
      ASSERT_EQ(block.qs[16 * j + i], iq4_index(j, i) | (iq4_index(j, 16 + i) << 4)) << j << " " << i;
  EXPECT_EQ(block.qs[0], 0x10);  // indices 0 and 1
  EXPECT_EQ(block.qs[1], 0x65);  // indices 5 and 6
  unsigned char bytes[136];
  std::memcpy(bytes, &block, 136);
  EXPECT_EQ(bytes[1], 0x1C);  // d at offset 0, scales_h at 2, scales_l at 4, qs at 8
  EXPECT_EQ(bytes[2], 0x78);
  EXPECT_EQ(bytes[3], 0x63);
  EXPECT_EQ(bytes[4], 0x50);
  EXPECT_EQ(bytes[9], 0x65);
  int8_t scales[8];
  unpack_iq4xs_scales(block, scales);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(scales[j], kIq4Scales[j]);

  float y[256];
  dequantize_row_iq4xs(&block, y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i]) << i;
}

TEST(LowBitKQuantFormat, TraitsIdsAndRouting) {
  // GGUF type ids and block geometry as the GGUF specification numbers them.
  for (auto [type, id, name, bytes] : {std::tuple{DType::Q2_K, 10u, "Q2_K", 84},
                                       {DType::Q3_K, 11u, "Q3_K", 110},
                                       {DType::IQ4_XS, 23u, "IQ4_XS", 136}}) {
    EXPECT_EQ(static_cast<uint32_t>(type), id);
    ASSERT_TRUE(dtype_traits(id).has_value());
    EXPECT_EQ(dtype_traits(id)->name, name);
    EXPECT_EQ(dtype_traits(type).block_size, 256);
    EXPECT_EQ(dtype_traits(type).block_bytes, bytes);
    EXPECT_EQ(dtype_block_geometry(type), (std::pair<int64_t, int64_t>{256, bytes}));
    EXPECT_TRUE(dtype_traits(type).supported);
    EXPECT_TRUE(dtype_is_computable(type));
    EXPECT_TRUE(dtype_from_name(name) == type) << name;
    EXPECT_EQ(dtype_row_bytes(type, 768), 3 * bytes);
    // quantize_row/dequantize_row route to the low-bit code: same bytes, same values.
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(512), y(512), z(512);
    for (float& v : x) v = normal(rng);
    std::vector<unsigned char> via_quant(2 * bytes), direct(2 * bytes);
    quantize_row(type, x.data(), via_quant.data(), 512);
    if (type == DType::Q2_K) {
      quantize_row_q2k(x.data(), reinterpret_cast<BlockQ2K*>(direct.data()), 512);
      dequantize_row_q2k(reinterpret_cast<BlockQ2K*>(direct.data()), z.data(), 512);
    } else if (type == DType::Q3_K) {
      quantize_row_q3k(x.data(), reinterpret_cast<BlockQ3K*>(direct.data()), 512);
      dequantize_row_q3k(reinterpret_cast<BlockQ3K*>(direct.data()), z.data(), 512);
    } else {
      quantize_row_iq4xs(x.data(), reinterpret_cast<BlockIQ4XS*>(direct.data()), 512);
      dequantize_row_iq4xs(reinterpret_cast<BlockIQ4XS*>(direct.data()), z.data(), 512);
    }
    EXPECT_EQ(via_quant, direct) << name;
    dequantize_row(type, via_quant.data(), y.data(), 512);
    EXPECT_EQ(y, z) << name;
  }
}

TEST(LowBitKQuantFormat, ZeroAndConstantBlocks) {
  for (DType type : {DType::Q2_K, DType::Q3_K, DType::IQ4_XS}) {
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

TEST(LowBitKQuantFormat, RoundTripErrorOrdering) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(64 * 256);
  for (float& v : x) v = normal(rng);
  for (size_t i = 0; i < x.size(); i += 97) x[i] *= 6.0f;  // a few outliers, as in real weights
  const double q2 = relative_rms_error(DType::Q2_K, x), q3 = relative_rms_error(DType::Q3_K, x);
  const double iq4 = relative_rms_error(DType::IQ4_XS, x), q4 = relative_rms_error(DType::Q4_K, x);
  std::printf("relative rms error: Q2_K %.4f  Q3_K %.4f  IQ4_XS %.4f  (Q4_K %.4f)\n", q2, q3, iq4, q4);
  EXPECT_LT(q2, 0.45);
  EXPECT_LT(q3, 0.25);
  EXPECT_LT(iq4, 0.13);
  EXPECT_LT(q3, 0.8 * q2);
  EXPECT_LT(iq4, 0.7 * q3);
}

}  // namespace
}  // namespace tandem
