// The 32-element block formats Q5_0, Q5_1, IQ4_NL and MXFP4 (base/quant32.h) byte for byte:
// type ids and sizes as GGUF numbers them, blocks written by the quantizers against bytes worked
// out by hand from the specification, hand-made blocks decoded to values worked out by hand
// (ggml's nibble order: byte j holds element j low, element j + 16 high), and the quantizers'
// error on random data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/quant.h"
#include "base/quant32.h"

namespace tandem {
namespace {

std::vector<uint8_t> quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> bytes(static_cast<size_t>(dtype_row_bytes(type, static_cast<int64_t>(x.size()))));
  quantize_row(type, x.data(), bytes.data(), static_cast<int64_t>(x.size()));
  return bytes;
}

std::vector<float> dequantize(DType type, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(type, bytes.data(), out.data(), n);
  return out;
}

TEST(Quant32Format, TypeIdsAndBlockSizes) {
  // GGUF type ids (ggml_type): Q5_0 6, Q5_1 7, IQ4_NL 20, MXFP4 39.
  struct Expected {
    uint32_t id;
    const char* name;
    int64_t block_bytes;
  };
  for (const Expected& e : {Expected{6, "Q5_0", 2 + 4 + 16}, Expected{7, "Q5_1", 2 + 2 + 4 + 16},
                            Expected{20, "IQ4_NL", 2 + 16}, Expected{39, "MXFP4", 1 + 16}}) {
    const auto traits = dtype_traits(e.id);
    ASSERT_TRUE(traits.has_value()) << e.name;
    EXPECT_EQ(traits->name, e.name);
    EXPECT_EQ(traits->block_size, 32) << e.name;
    EXPECT_EQ(traits->block_bytes, e.block_bytes) << e.name;
    EXPECT_TRUE(traits->supported) << e.name;
    const DType type = static_cast<DType>(e.id);
    EXPECT_TRUE(dtype_is_computable(type)) << e.name;
    EXPECT_EQ(dtype_from_name(e.name), type);
    EXPECT_EQ(dtype_block_geometry(type), (std::pair<int64_t, int64_t>{32, e.block_bytes})) << e.name;
    EXPECT_EQ(dtype_row_bytes(type, 96), 3 * e.block_bytes) << e.name;
  }
  EXPECT_EQ(dtype_from_name("iq4_nl"), DType::IQ4_NL);
  EXPECT_EQ(dtype_from_name("mxfp4"), DType::MXFP4);
}

TEST(Quant32Format, Q5_0ScaleOneStoresTheCodes) {
  // x = j - 16: the extreme -16 gives d = 1, so code j = j; codes >= 16 set qh bits 16-31.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  const std::vector<uint8_t> bytes = quantize(DType::Q5_0, x);
  const std::vector<uint8_t> head = {0x00, 0x3c, 0x00, 0x00, 0xff, 0xff};  // f16 1.0, qh = 0xffff0000
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 6), head);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(bytes[6 + j], j * 0x11) << j;  // low nibble j, high nibble (j + 16) & 15
  EXPECT_EQ(dequantize(DType::Q5_0, bytes, 32), x);
}

TEST(Quant32Format, Q5_0SparseBlock) {
  // Zeros but three elements: x[3] = -4 is the extreme, d = 0.25 (f16 0x3400), code 0; x[7] = 0.5
  // is code 18; x[19] = 3.75 code 31; zeros code 16. qh: every bit but bit 3.
  std::vector<float> x(32, 0.0f);
  x[3] = -4.0f, x[7] = 0.5f, x[19] = 3.75f;
  const std::vector<uint8_t> bytes = quantize(DType::Q5_0, x);
  std::vector<uint8_t> expected = {0x00, 0x34, 0xf7, 0xff, 0xff, 0xff};
  expected.resize(22, 0x00);
  expected[6 + 3] = 0xf0;  // element 3 code 0 (low), element 19 code 31 -> 15 (high)
  expected[6 + 7] = 0x02;  // element 7 code 18 -> 2 (low), element 23 code 16 -> 0 (high)
  EXPECT_EQ(bytes, expected);
  EXPECT_EQ(dequantize(DType::Q5_0, bytes, 32), x);
}

TEST(Quant32Format, Q5_1StoresScaleMinAndCodes) {
  // x = 1 + j/2: min 1 (f16 0x3c00), d = 15.5 / 31 = 0.5 (f16 0x3800), code j.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 1.0f + 0.5f * static_cast<float>(j);
  const std::vector<uint8_t> bytes = quantize(DType::Q5_1, x);
  const std::vector<uint8_t> head = {0x00, 0x38, 0x00, 0x3c, 0x00, 0x00, 0xff, 0xff};
  EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 8), head);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(bytes[8 + j], j * 0x11) << j;
  EXPECT_EQ(dequantize(DType::Q5_1, bytes, 32), x);
}

TEST(Quant32Format, Q5_1HandMadeBlockDecodes) {
  // d = 2 (0x4000), m = -3 (0xc200); nibbles byte 0 = 0x5a, qh bit 0 and bit 16 set:
  // element 0 = code 0x1a = 26 -> 2 * 26 - 3 = 49; element 16 = code 0x15 = 21 -> 39.
  std::vector<uint8_t> block(24, 0x00);
  block[0] = 0x00, block[1] = 0x40, block[2] = 0x00, block[3] = 0xc2;
  block[4] = 0x01, block[6] = 0x01;  // qh = 0x00010001
  block[8] = 0x5a;
  block[9] = 0x0f;  // element 1: code 15 -> 27; element 17: code 0 -> -3
  const std::vector<float> values = dequantize(DType::Q5_1, block, 32);
  EXPECT_EQ(values[0], 49.0f);
  EXPECT_EQ(values[16], 39.0f);
  EXPECT_EQ(values[1], 27.0f);
  EXPECT_EQ(values[17], -3.0f);
  EXPECT_EQ(values[2], -3.0f);
}

TEST(Quant32Format, Iq4nlLevelsTimesHalfAreExact) {
  // The 16 IQ4_NL levels (ggml's kvalues_iq4nl), written out here from the specification.
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int i = 0; i < 16; ++i) EXPECT_EQ(kIq4nlValues[i], levels[i]);
  // x[j] = levels[7j mod 16] / 2: the extreme -63.5 maps to level -127 with d = 0.5 (0x3800).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = 0.5f * static_cast<float>(levels[(7 * j) % 16]);
  const std::vector<uint8_t> bytes = quantize(DType::IQ4_NL, x);
  ASSERT_EQ(bytes.size(), 18u);
  EXPECT_EQ(bytes[0], 0x00);
  EXPECT_EQ(bytes[1], 0x38);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(bytes[2 + j], ((7 * j) % 16) * 0x11) << j;
  EXPECT_EQ(dequantize(DType::IQ4_NL, bytes, 32), x);
}

TEST(Quant32Format, Iq4nlHandMadeBlockDecodes) {
  // d = 1 (0x3c00); byte 0 = 0xf0: element 0 is level 0 (-127), element 16 level 15 (113);
  // byte 1 = 0x78: element 1 level 8 (1), element 17 level 7 (-10).
  std::vector<uint8_t> block(18, 0x88);  // level 8 everywhere else: 1
  block[0] = 0x00, block[1] = 0x3c, block[2] = 0xf0, block[3] = 0x78;
  const std::vector<float> values = dequantize(DType::IQ4_NL, block, 32);
  EXPECT_EQ(values[0], -127.0f);
  EXPECT_EQ(values[16], 113.0f);
  EXPECT_EQ(values[1], 1.0f);
  EXPECT_EQ(values[17], -10.0f);
  EXPECT_EQ(values[5], 1.0f);
}

TEST(Quant32Format, Mxfp4HandMadeBlocksDecode) {
  // E2M1 nibbles: bit 3 the sign; magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. value = fp4 * 2^(e-127).
  std::vector<uint8_t> block(17, 0x00);
  block[0] = 128;   // x 2
  block[1] = 0x7a;  // element 0: 0xa = -1 -> -2; element 16: 0x7 = 6 -> 12
  block[2] = 0x91;  // element 1: 0x1 = 0.5 -> 1; element 17: 0x9 = -0.5 -> -1
  block[3] = 0x5c;  // element 2: 0xc = -2 -> -4; element 18: 0x5 = 3 -> 6
  std::vector<float> values = dequantize(DType::MXFP4, block, 32);
  EXPECT_EQ(values[0], -2.0f);
  EXPECT_EQ(values[16], 12.0f);
  EXPECT_EQ(values[1], 1.0f);
  EXPECT_EQ(values[17], -1.0f);
  EXPECT_EQ(values[2], -4.0f);
  EXPECT_EQ(values[18], 6.0f);
  EXPECT_EQ(values[3], 0.0f);
  // The ends of the exponent range: e = 0 is 2^-127 (fp4 6 -> 6 * 2^-127, a subnormal float),
  // e = 254 is 2^127.
  block[0] = 0;
  values = dequantize(DType::MXFP4, block, 32);
  EXPECT_EQ(values[16], std::ldexp(6.0f, -127));
  EXPECT_EQ(values[1], std::ldexp(0.5f, -127));
  block[0] = 254;
  values = dequantize(DType::MXFP4, block, 32);
  EXPECT_EQ(values[1], std::ldexp(0.5f, 127));
  EXPECT_EQ(values[0], std::ldexp(-1.0f, 127));
  block[0] = 127;
  values = dequantize(DType::MXFP4, block, 32);
  EXPECT_EQ(values[18], 3.0f);
}

TEST(Quant32Format, Mxfp4GridValuesQuantizeExactly) {
  // Element j (and j + 16) is fp4 code j * 4: max |x| = 24 = 6 * 2^2, so e = 129 (0x81) and
  // every value is on the grid. Code 8 is -0: written back as code 0.
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) {
    const int code = j % 16;
    x[j] = (code & 8 ? -4.0f : 4.0f) * magnitudes[code & 7];
  }
  const std::vector<uint8_t> bytes = quantize(DType::MXFP4, x);
  ASSERT_EQ(bytes.size(), 17u);
  EXPECT_EQ(bytes[0], 0x81);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(bytes[1 + j], j == 8 ? 0x00 : j * 0x11) << j;
  EXPECT_EQ(dequantize(DType::MXFP4, bytes, 32), x);  // -0 == 0
}

TEST(Quant32Format, ZeroBlocksStayZero) {
  const std::vector<float> zeros(64, 0.0f);
  for (DType type : {DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::MXFP4})
    for (float v : dequantize(type, quantize(type, zeros), 64)) EXPECT_EQ(v, 0.0f) << dtype_name(type);
}

// Relative RMS error on N(0, 1) rows, every seventh block offset by 3: what each format's bits
// allow (measured: Q5_1 0.025, Q5_0 0.035, IQ4_NL 0.065, MXFP4 0.105), with some room.
TEST(Quant32Format, QuantizersStayWithinTheirPrecision) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(32 * 256);
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) + (i / 32 % 7 == 0 ? 3.0f : 0.0f);
  struct Bound {
    DType type;
    double max_error;
  };
  for (const Bound& bound :
       {Bound{DType::Q5_0, 0.045}, Bound{DType::Q5_1, 0.035}, Bound{DType::IQ4_NL, 0.08}, Bound{DType::MXFP4, 0.13}}) {
    const std::vector<float> back = dequantize(bound.type, quantize(bound.type, x), static_cast<int64_t>(x.size()));
    double error = 0.0, norm = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      error += (back[i] - x[i]) * (back[i] - x[i]);
      norm += x[i] * x[i];
    }
    const double relative = std::sqrt(error / norm);
    EXPECT_LT(relative, bound.max_error) << dtype_name(bound.type);
    EXPECT_GT(relative, 0.0) << dtype_name(bound.type);
    std::printf("%s: relative RMS error %.4f\n", std::string(dtype_name(bound.type)).c_str(), relative);
  }
}

}  // namespace
}  // namespace tandem
