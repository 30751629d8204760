// Reference quantizers and dequantizers of Q2_K, Q3_K and IQ4_XS (layouts in
// base/kquants_low_bit.h). Each sub-block gets a scale (and for Q2_K a min) fitted by a small
// search with a least-squares refit; the sub-block scales are then quantized against the
// super-block f16 scale(s), and the elements against the scales as stored, so dequantizing
// reproduces exactly what was fitted. Simple and deterministic, not llama.cpp's quantizers:
// only the format has to match.
#include "base/kquants_low_bit.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "base/kquants.h"

namespace tandem {
namespace {

int round_clamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi); }

// Midpoints between neighbouring IQ4 levels: the nearest level's index is the number of
// midpoints below v (a tie goes to the lower level). Counting, rather than a binary search,
// has no data-dependent branches: the quantizer calls it for every element of every candidate.
struct Iq4Midpoints {
  float values[15];
  constexpr Iq4Midpoints() : values{} {
    for (int m = 0; m < 15; ++m) values[m] = 0.5f * static_cast<float>(kIq4NonLinear[m] + kIq4NonLinear[m + 1]);
  }
};
constexpr Iq4Midpoints kIq4Midpoints;

int nearest_iq4_index(float v) {
  int index = 0;
  for (float midpoint : kIq4Midpoints.values) index += v > midpoint;
  return index;
}

// Symmetric sub-block fit x ~ scale * level(x / scale) over a fixed set of levels whose most
// negative one, `extreme_level`, has the largest magnitude: the element of largest magnitude
// maps onto it, then scaled candidates and least-squares refits may replace that when better.
// `level` rounds a value to the nearest level.
template <typename Level>
float fit_symmetric_levels(const float* x, int n, float extreme_level, Level level) {
  float amax = 0.0f, extreme = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  auto error = [&](float scale) {
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float diff = scale * level(x[i] / scale) - x[i];
      sum += diff * diff;
    }
    return sum;
  };
  const float first = extreme / extreme_level;
  float best = first, best_error = error(first);
  for (int step = -3; step <= 3; ++step) {
    const float candidate = first * (1.0f + 0.04f * static_cast<float>(step));
    double sxl = 0, sll = 0;
    for (int i = 0; i < n; ++i) {
      const double l = level(x[i] / candidate);
      sxl += static_cast<double>(x[i]) * l;
      sll += l * l;
    }
    const float refit = sll > 0 ? static_cast<float>(sxl / sll) : candidate;
    for (float s : {candidate, refit}) {
      if (s == 0.0f) continue;
      const float e = error(s);
      if (e < best_error) {
        best_error = e;
        best = s;
      }
    }
  }
  return best;
}

// The super-block scale for signed sub-block scales stored in [-32, 31]: the largest in
// magnitude maps to -32, the side with one more level.
float signed_super_scale(const float* fits, int n) {
  float amax = 0.0f, extreme = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(fits[j]) > amax) {
      amax = std::fabs(fits[j]);
      extreme = fits[j];
    }
  }
  return extreme / -32.0f;
}

}  // namespace

void unpack_q2k_quants(const BlockQ2K& block, uint8_t q[256]) {
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) q[128 * h + 32 * k + l] = (block.qs[32 * h + l] >> (2 * k)) & 3;
}

void unpack_q3k_quants(const BlockQ3K& block, int8_t q[256]) {
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 32; ++l) {
        const int low = (block.qs[32 * h + l] >> (2 * k)) & 3;
        const int high = (block.hmask[l] >> (4 * h + k)) & 1;
        q[128 * h + 32 * k + l] = static_cast<int8_t>(low - (high ? 0 : 4));
      }
}

void unpack_q3k_scales(const uint8_t packed[12], int8_t scales[16]) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0x0f : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

void pack_q3k_scales(const int8_t scales[16], uint8_t packed[12]) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 16; ++j) {
    const int u = scales[j] + 32;
    packed[j % 8] |= static_cast<uint8_t>((u & 0x0f) << (j < 8 ? 0 : 4));
    packed[8 + j % 4] |= static_cast<uint8_t>((u >> 4) << (2 * (j / 4)));
  }
}

void unpack_iq4xs_scales(const BlockIQ4XS& block, int8_t scales[8]) {
  for (int j = 0; j < 8; ++j) {
    const int low = (block.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f;
    const int high = (block.scales_h >> (2 * j)) & 3;
    scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

void quantize_row_q2k(const float* x, BlockQ2K* out, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    BlockQ2K& block = out[b];
    KQuantScaleMin fits[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      fits[j] = fit_scale_min(xb + 16 * j, 16, 3);
      max_scale = std::max(max_scale, fits[j].scale);
      max_min = std::max(max_min, fits[j].min);
    }
    block.d_f16 = f32_to_f16(max_scale / 15.0f);
    block.dmin_f16 = f32_to_f16(max_min / 15.0f);
    const float d = f16_to_f32(block.d_f16), dmin = f16_to_f32(block.dmin_f16);
    uint8_t q[256];
    for (int j = 0; j < 16; ++j) {
      const int scale = d > 0.0f ? round_clamp(fits[j].scale / d, 0, 15) : 0;
      const int min = dmin > 0.0f ? round_clamp(fits[j].min / dmin, 0, 15) : 0;
      block.scales[j] = static_cast<uint8_t>(scale | (min << 4));
      const float dl = d * scale, ml = dmin * min;
      for (int i = 16 * j; i < 16 * j + 16; ++i)
        q[i] = static_cast<uint8_t>(dl > 0.0f ? round_clamp((xb[i] + ml) / dl, 0, 3) : 0);
    }
    std::memset(block.qs, 0, sizeof(block.qs));
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) block.qs[32 * h + l] |= static_cast<uint8_t>(q[128 * h + 32 * k + l] << (2 * k));
  }
}

void quantize_row_q3k(const float* x, BlockQ3K* out, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  auto level = [](float v) { return static_cast<float>(round_clamp(v, -4, 3)); };
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    BlockQ3K& block = out[b];
    float fits[16];
    for (int j = 0; j < 16; ++j) fits[j] = fit_symmetric_levels(xb + 16 * j, 16, -4.0f, level);
    block.d_f16 = f32_to_f16(signed_super_scale(fits, 16));
    const float d = f16_to_f32(block.d_f16);
    int8_t scales[16];
    uint8_t u[256];  // q + 4, in [0, 7]
    for (int j = 0; j < 16; ++j) {
      scales[j] = static_cast<int8_t>(d != 0.0f ? round_clamp(fits[j] / d, -32, 31) : 0);
      const float dl = d * scales[j];
      for (int i = 16 * j; i < 16 * j + 16; ++i)
        u[i] = static_cast<uint8_t>((dl != 0.0f ? round_clamp(xb[i] / dl, -4, 3) : 0) + 4);
    }
    pack_q3k_scales(scales, block.scales);
    std::memset(block.qs, 0, sizeof(block.qs));
    std::memset(block.hmask, 0, sizeof(block.hmask));
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k)
        for (int l = 0; l < 32; ++l) {
          const int v = u[128 * h + 32 * k + l];
          block.qs[32 * h + l] |= static_cast<uint8_t>((v & 3) << (2 * k));
          block.hmask[l] |= static_cast<uint8_t>((v >> 2) << (4 * h + k));
        }
  }
}

void quantize_row_iq4xs(const float* x, BlockIQ4XS* out, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  auto level = [](float v) { return static_cast<float>(kIq4NonLinear[nearest_iq4_index(v)]); };
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    BlockIQ4XS& block = out[b];
    float fits[8];
    for (int j = 0; j < 8; ++j) fits[j] = fit_symmetric_levels(xb + 32 * j, 32, -127.0f, level);
    block.d_f16 = f32_to_f16(signed_super_scale(fits, 8));
    const float d = f16_to_f32(block.d_f16);
    block.scales_h = 0;
    std::memset(block.scales_l, 0, sizeof(block.scales_l));
    for (int j = 0; j < 8; ++j) {
      const int scale = d != 0.0f ? round_clamp(fits[j] / d, -32, 31) : 0;
      const int ls = scale + 32;
      block.scales_l[j / 2] |= static_cast<uint8_t>((ls & 0x0f) << (4 * (j % 2)));
      block.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
      const float dl = d * scale;
      for (int i = 0; i < 16; ++i) {
        // With a zero scale every level decodes to 0; index 8 (level 1) is as good as any.
        const int lo = dl != 0.0f ? nearest_iq4_index(xb[32 * j + i] / dl) : 8;
        const int hi = dl != 0.0f ? nearest_iq4_index(xb[32 * j + 16 + i] / dl) : 8;
        block.qs[16 * j + i] = static_cast<uint8_t>(lo | (hi << 4));
      }
    }
  }
}

void dequantize_row_q2k(const BlockQ2K* blocks, float* y, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    uint8_t q[256];
    unpack_q2k_quants(blocks[b], q);
    const float d = f16_to_f32(blocks[b].d_f16), dmin = f16_to_f32(blocks[b].dmin_f16);
    for (int j = 0; j < 16; ++j) {
      // (d * scale) * q - dmin * min, as for Q4_K: the order llama.cpp decodes in.
      const float dl = d * (blocks[b].scales[j] & 0x0f), ml = dmin * (blocks[b].scales[j] >> 4);
      for (int i = 16 * j; i < 16 * j + 16; ++i) y[b * 256 + i] = dl * q[i] - ml;
    }
  }
}

void dequantize_row_q3k(const BlockQ3K* blocks, float* y, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    int8_t q[256], scales[16];
    unpack_q3k_quants(blocks[b], q);
    unpack_q3k_scales(blocks[b].scales, scales);
    const float d = f16_to_f32(blocks[b].d_f16);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * scales[j];
      for (int i = 16 * j; i < 16 * j + 16; ++i) y[b * 256 + i] = dl * q[i];
    }
  }
}

void dequantize_row_iq4xs(const BlockIQ4XS* blocks, float* y, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    int8_t scales[8];
    unpack_iq4xs_scales(blocks[b], scales);
    const float d = f16_to_f32(blocks[b].d_f16);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * scales[j];
      float* out = y + b * 256 + 32 * j;
      for (int i = 0; i < 16; ++i) {
        out[i] = dl * kIq4NonLinear[blocks[b].qs[16 * j + i] & 0x0f];
        out[16 + i] = dl * kIq4NonLinear[blocks[b].qs[16 * j + i] >> 4];
      }
    }
  }
}

}  // namespace tandem
