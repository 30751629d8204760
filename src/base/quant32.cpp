// Reference quantizers for Q5_0, Q5_1, IQ4_NL and MXFP4 (layouts in base/quant32.h). Simple and
// deterministic rather than optimal:
//   Q5_0:   d = m / -16, m the element of largest magnitude (sign kept), so m is code 0 exactly;
//           q = clamp(trunc(x / d + 16.5), 0, 31) — Q4_0's rule with 32 levels.
//   Q5_1:   d = (max - min) / 31, m = min; q = round((x - m) / d) with the f16-rounded d and m.
//   IQ4_NL: a few candidate scales around the two that map the extreme element onto an end of
//           the table; per candidate, nearest levels, then the least-squares scale for those
//           levels; the candidate with the smallest squared error wins.
//   MXFP4:  the smallest power-of-two scale that keeps max |x| within fp4's 6, and the one below
//           it (clipping the largest element may cost less than coarser steps for the rest);
//           each element to its nearest fp4 value; the lower squared error wins.
#include "base/quant32.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/half.h"

namespace tandem {
namespace {

// The element of largest magnitude, sign kept (the first one on ties).
float extreme_element(const float* x) {
  float amax = 0.0f, extreme = 0.0f;
  for (int i = 0; i < kQ32BlockSize; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  return extreme;
}

// Packs 32 codes of 4 bits (and, with qh, a fifth bit each) in ggml's order.
void pack_codes(const uint8_t codes[32], uint8_t nibbles[16], uint8_t* qh) {
  for (int j = 0; j < 16; ++j) nibbles[j] = static_cast<uint8_t>((codes[j] & 0x0f) | ((codes[j + 16] & 0x0f) << 4));
  if (qh == nullptr) return;
  uint32_t bits = 0;
  for (int j = 0; j < 32; ++j) bits |= static_cast<uint32_t>((codes[j] >> 4) & 1) << j;
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(bits >> (8 * b));
}

// Index of the nearest of `n` ascending levels: the number of midpoints below v (ties go to the
// lower level), found in 4 steps over the 15 midpoints of a 16-level table.
template <int kLevels>
int nearest_level(const float (&midpoints)[kLevels - 1], float v) {
  int index = 0;
  for (int step = 8; step > 0; step /= 2)
    if (index + step <= kLevels - 1 && v > midpoints[index + step - 1]) index += step;
  return index;
}

struct Iq4nlMidpoints {
  float values[15];
  constexpr Iq4nlMidpoints() : values() {
    for (int i = 0; i < 15; ++i) values[i] = 0.5f * static_cast<float>(kIq4nlValues[i] + kIq4nlValues[i + 1]);
  }
};
constexpr Iq4nlMidpoints kIq4nlMidpoints;

// fp4 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (kMxfp4Values / 2) and the midpoints between them.
constexpr float kFp4Magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
constexpr float kFp4Midpoints[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};

// Squared error of block x under IQ4_NL scale d, writing the codes; d is then replaced by the
// least-squares scale for those codes.
double iq4nl_try(const float* x, float& d, uint8_t codes[32]) {
  const float inverse = 1.0f / d;
  double xt = 0.0, tt = 0.0;
  for (int j = 0; j < 32; ++j) {
    codes[j] = static_cast<uint8_t>(nearest_level<16>(kIq4nlMidpoints.values, x[j] * inverse));
    const double t = kIq4nlValues[codes[j]];
    xt += x[j] * t;
    tt += t * t;
  }
  d = static_cast<float>(xt / tt);
  double error = 0.0;
  for (int j = 0; j < 32; ++j) {
    const double diff = x[j] - static_cast<double>(d) * kIq4nlValues[codes[j]];
    error += diff * diff;
  }
  return error;
}

// Squared error of block x under MXFP4 exponent e, writing the codes.
double mxfp4_try(const float* x, int e, uint8_t codes[32]) {
  const float scale = std::ldexp(1.0f, e - 127);  // fp4 units
  double error = 0.0;
  for (int j = 0; j < 32; ++j) {
    const float v = x[j] / scale;
    const int magnitude = nearest_level<8>(kFp4Midpoints, std::fabs(v));
    codes[j] = static_cast<uint8_t>(magnitude | (v < 0.0f && magnitude != 0 ? 8 : 0));
    const double diff = x[j] - static_cast<double>(std::copysign(kFp4Magnitudes[magnitude], v)) * scale;
    error += diff * diff;
  }
  return error;
}

}  // namespace

void quantize_row_q5_0(const float* src, BlockQ5_0* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ32BlockSize; ++b) {
    const float* x = src + b * kQ32BlockSize;
    const float d = extreme_element(x) / -16.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t codes[32];
    for (int j = 0; j < 32; ++j)
      codes[j] = static_cast<uint8_t>(std::min(31, static_cast<int>(x[j] * inverse + 16.5f)));
    out[b].scale_f16 = f32_to_f16(d);
    pack_codes(codes, out[b].nibbles, out[b].qh);
  }
}

void quantize_row_q5_1(const float* src, BlockQ5_1* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ32BlockSize; ++b) {
    const float* x = src + b * kQ32BlockSize;
    const auto [low, high] = std::minmax_element(x, x + kQ32BlockSize);
    out[b].scale_f16 = f32_to_f16((*high - *low) / 31.0f);
    out[b].min_f16 = f32_to_f16(*low);
    // Codes against the values the file will hold, so rounding of d and m is not doubled.
    const float d = f16_to_f32(out[b].scale_f16), m = f16_to_f32(out[b].min_f16);
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t codes[32];
    for (int j = 0; j < 32; ++j)
      codes[j] = static_cast<uint8_t>(std::clamp(static_cast<int>(std::lround((x[j] - m) * inverse)), 0, 31));
    pack_codes(codes, out[b].nibbles, out[b].qh);
  }
}

void quantize_row_iq4_nl(const float* src, BlockIQ4_NL* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ32BlockSize; ++b) {
    const float* x = src + b * kQ32BlockSize;
    const float extreme = extreme_element(x);
    uint8_t best_codes[32] = {};
    float best_d = 0.0f;
    if (extreme != 0.0f) {
      double best_error = INFINITY;
      // The extreme element on level -127 or on level 113, each stretched by up to +-9 %.
      for (const float end : {-127.0f, 113.0f})
        for (int k = -3; k <= 3; ++k) {
          float d = extreme / end * (1.0f + 0.03f * static_cast<float>(k));
          uint8_t codes[32];
          const double error = iq4nl_try(x, d, codes);
          if (error < best_error) {
            best_error = error;
            best_d = d;
            std::memcpy(best_codes, codes, sizeof(codes));
          }
        }
    } else {
      std::fill(best_codes, best_codes + 32, uint8_t{8});  // level 1 * d = 0
    }
    out[b].scale_f16 = f32_to_f16(best_d);
    pack_codes(best_codes, out[b].nibbles, nullptr);
  }
}

void quantize_row_mxfp4(const float* src, BlockMXFP4* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ32BlockSize; ++b) {
    const float* x = src + b * kQ32BlockSize;
    const float amax = std::fabs(extreme_element(x));
    uint8_t best_codes[32] = {};
    int best_e = 0;
    if (amax > 0.0f) {
      // amax / 2^(e - 127) <= 6; e = 255 is reserved (NaN) in the OCP format.
      const int top = std::clamp(static_cast<int>(std::ceil(std::log2(amax / 6.0f))) + 127, 1, 254);
      double best_error = INFINITY;
      for (int e : {top, top - 1}) {
        uint8_t codes[32];
        const double error = mxfp4_try(x, e, codes);
        if (error < best_error) {
          best_error = error;
          best_e = e;
          std::memcpy(best_codes, codes, sizeof(codes));
        }
      }
    }
    out[b].e = static_cast<uint8_t>(best_e);
    pack_codes(best_codes, out[b].nibbles, nullptr);
  }
}

void dequantize_row_q5_0(const BlockQ5_0* blocks, float* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ32BlockSize; ++b) {
    const float d = f16_to_f32(blocks[b].scale_f16);
    for (int j = 0; j < 32; ++j)
      out[b * 32 + j] = d * static_cast<float>(q5_code(blocks[b].nibbles, blocks[b].qh, j) - 16);
  }
}

void dequantize_row_q5_1(const BlockQ5_1* blocks, float* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ32BlockSize; ++b) {
    const float d = f16_to_f32(blocks[b].scale_f16), m = f16_to_f32(blocks[b].min_f16);
    for (int j = 0; j < 32; ++j)
      out[b * 32 + j] = d * static_cast<float>(q5_code(blocks[b].nibbles, blocks[b].qh, j)) + m;
  }
}

void dequantize_row_iq4_nl(const BlockIQ4_NL* blocks, float* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ32BlockSize; ++b) {
    const float d = f16_to_f32(blocks[b].scale_f16);
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = d * kIq4nlValues[nibble_code(blocks[b].nibbles, j)];
  }
}

void dequantize_row_mxfp4(const BlockMXFP4* blocks, float* out, int64_t n) {
  for (int64_t b = 0; b < n / kQ32BlockSize; ++b) {
    const float d = mxfp4_half_scale(blocks[b].e);
    for (int j = 0; j < 32; ++j) out[b * 32 + j] = d * kMxfp4Values[nibble_code(blocks[b].nibbles, j)];
  }
}

}  // namespace tandem
