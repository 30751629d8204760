// Reference k-quant quantizers and dequantizers (layouts in base/kquants.h). Quantizing fits a
// scale (and, for Q4_K/Q5_K, a non-negative min) per sub-block by trying a few ranges and a
// least-squares refit, keeping the smallest squared error; then the sub-block scales are
// themselves quantized (6 or 8 bits) against a super-block f16 scale, and the elements are
// quantized against the scales as stored, so dequantizing reproduces exactly what was fitted.
#include "base/kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"

namespace tandem {
namespace {

int round_clamp(float v, int lo, int hi) { return std::clamp(static_cast<int>(std::nearbyint(v)), lo, hi); }

// Sub-block model x ~ scale * q - min with q in [0, nmax] and min >= 0 (the format stores the
// min as a subtracted non-negative value, so a sub-block's offset can never be positive).
struct ScaleMin {
  float scale;
  float min;
};

float asymmetric_error(const float* x, int n, int nmax, ScaleMin f) {
  float error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int q = f.scale > 0.0f ? round_clamp((x[i] + f.min) / f.scale, 0, nmax) : 0;
    const float diff = f.scale * q - f.min - x[i];
    error += diff * diff;
  }
  return error;
}

// Least-squares (scale, min) for the quants that `f` assigns, min kept >= 0.
ScaleMin refit_asymmetric(const float* x, int n, int nmax, ScaleMin f) {
  double sq = 0, sqq = 0, sx = 0, sxq = 0;
  for (int i = 0; i < n; ++i) {
    const int q = round_clamp((x[i] + f.min) / f.scale, 0, nmax);
    sq += q;
    sqq += static_cast<double>(q) * q;
    sx += x[i];
    sxq += static_cast<double>(x[i]) * q;
  }
  const double det = n * sqq - sq * sq;
  if (det <= 0) return f;
  double scale = (n * sxq - sq * sx) / det;
  double offset = (sx - scale * sq) / n;  // x ~ scale*q + offset
  if (offset > 0) {
    offset = 0;
    scale = sxq / sqq;
  }
  if (scale <= 0) return f;
  return {static_cast<float>(scale), static_cast<float>(-offset)};
}

ScaleMin fit_asymmetric(const float* x, int n, int nmax) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  if (hi <= lo) return {0.0f, -lo};
  // The plain min..max range first: on data that lies on a grid it is exact, and the
  // candidates below only replace it when strictly better.
  ScaleMin best{(hi - lo) / nmax, -lo};
  float best_error = asymmetric_error(x, n, nmax, best);
  constexpr float kSteps[] = {0.0f, -1.0f, 1.0f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (float step : kSteps) {
    const ScaleMin candidate{(hi - lo) / (nmax + 0.1f * step), -lo};
    const ScaleMin refit = refit_asymmetric(x, n, nmax, candidate);
    for (ScaleMin f : {candidate, refit}) {
      const float error = asymmetric_error(x, n, nmax, f);
      if (error < best_error) {
        best_error = error;
        best = f;
      }
    }
  }
  return best;
}

// Fits the 8 sub-blocks of 32 of a Q4_K/Q5_K block; writes d, dmin, packed scales and the
// element quants (q[256] in [0, nmax]).
void quantize_k4_block(const float* x, int nmax, uint16_t* d_f16, uint16_t* dmin_f16, uint8_t packed_scales[12],
                       uint8_t q[256]) {
  ScaleMin fits[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    fits[j] = fit_asymmetric(x + 32 * j, 32, nmax);
    max_scale = std::max(max_scale, fits[j].scale);
    max_min = std::max(max_min, fits[j].min);
  }
  *d_f16 = f32_to_f16(max_scale / 63.0f);
  *dmin_f16 = f32_to_f16(max_min / 63.0f);
  const float d = f16_to_f32(*d_f16), dmin = f16_to_f32(*dmin_f16);
  uint8_t scales[8], mins[8];
  for (int j = 0; j < 8; ++j) {
    scales[j] = static_cast<uint8_t>(d > 0.0f ? round_clamp(fits[j].scale / d, 0, 63) : 0);
    mins[j] = static_cast<uint8_t>(dmin > 0.0f ? round_clamp(fits[j].min / dmin, 0, 63) : 0);
    const float dl = d * scales[j], ml = dmin * mins[j];
    for (int i = 0; i < 32; ++i) {
      const float v = x[32 * j + i];
      q[32 * j + i] = static_cast<uint8_t>(dl > 0.0f ? round_clamp((v + ml) / dl, 0, nmax) : 0);
    }
  }
  pack_k4_scales(scales, mins, packed_scales);
}

float symmetric_error(const float* x, int n, float scale) {
  float error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int q = round_clamp(x[i] / scale, -32, 31);
    const float diff = scale * q - x[i];
    error += diff * diff;
  }
  return error;
}

// Q6_K sub-block of 16: x ~ scale * q, q in [-32, 31]. The element of largest magnitude maps
// to -32 (the side with one more level); a least-squares refit may shrink the scale.
float fit_symmetric(const float* x, int n) {
  float amax = 0.0f, extreme = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best = extreme / -32.0f;
  float best_error = symmetric_error(x, n, best);
  for (int step = -4; step <= 4; ++step) {
    const float candidate = best * (1.0f + 0.02f * step);
    double sxq = 0, sqq = 0;
    for (int i = 0; i < n; ++i) {
      const int q = round_clamp(x[i] / candidate, -32, 31);
      sxq += static_cast<double>(x[i]) * q;
      sqq += static_cast<double>(q) * q;
    }
    const float refit = sqq > 0 ? static_cast<float>(sxq / sqq) : candidate;
    for (float s : {candidate, refit}) {
      if (s == 0.0f) continue;
      const float error = symmetric_error(x, n, s);
      if (error < best_error) {
        best_error = error;
        best = s;
      }
    }
  }
  return best;
}

}  // namespace

KQuantScaleMin fit_scale_min(const float* x, int n, int nmax) {
  const ScaleMin fit = fit_asymmetric(x, n, nmax);
  return {fit.scale, fit.min};
}

void unpack_k4_scales(const uint8_t packed[12], uint8_t scales[8], uint8_t mins[8]) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = packed[j] & 63;
    mins[j] = packed[j + 4] & 63;
    scales[j + 4] = static_cast<uint8_t>((packed[j + 8] & 0x0f) | ((packed[j] >> 6) << 4));
    mins[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

void pack_k4_scales(const uint8_t scales[8], const uint8_t mins[8], uint8_t packed[12]) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>((scales[j] & 63) | ((scales[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>((mins[j] & 63) | ((mins[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((scales[j + 4] & 0x0f) | ((mins[j + 4] & 0x0f) << 4));
  }
}

void unpack_q4k_quants(const BlockQ4K& block, uint8_t q[256]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = block.qs[32 * c + l] & 0x0f;
      q[64 * c + 32 + l] = block.qs[32 * c + l] >> 4;
    }
  }
}

void unpack_q5k_quants(const BlockQ5K& block, uint8_t q[256]) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int high_lo = (block.qh[l] >> (2 * c)) & 1, high_hi = (block.qh[l] >> (2 * c + 1)) & 1;
      q[64 * c + l] = static_cast<uint8_t>((block.qs[32 * c + l] & 0x0f) | (high_lo << 4));
      q[64 * c + 32 + l] = static_cast<uint8_t>((block.qs[32 * c + l] >> 4) | (high_hi << 4));
    }
  }
}

void unpack_q6k_quants(const BlockQ6K& block, int8_t q[256]) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = block.ql + 64 * h;
    const uint8_t* qh = block.qh + 32 * h;
    int8_t* out = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<int8_t>(((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32);
      out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
      out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

void quantize_row_q4k(const float* x, BlockQ4K* out, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    uint8_t q[256];
    BlockQ4K& block = out[b];
    quantize_k4_block(x + b * kKQuantBlockSize, 15, &block.d_f16, &block.dmin_f16, block.scales, q);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        block.qs[32 * c + l] = static_cast<uint8_t>(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
  }
}

void quantize_row_q5k(const float* x, BlockQ5K* out, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    uint8_t q[256];
    BlockQ5K& block = out[b];
    quantize_k4_block(x + b * kKQuantBlockSize, 31, &block.d_f16, &block.dmin_f16, block.scales, q);
    std::memset(block.qh, 0, sizeof(block.qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = q[64 * c + l], hi = q[64 * c + 32 + l];
        block.qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        block.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void quantize_row_q6k(const float* x, BlockQ6K* out, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    BlockQ6K& block = out[b];
    float fits[16];
    float amax = 0.0f, extreme = 0.0f;
    for (int j = 0; j < 16; ++j) {
      fits[j] = fit_symmetric(xb + 16 * j, 16);
      if (std::fabs(fits[j]) > amax) {
        amax = std::fabs(fits[j]);
        extreme = fits[j];
      }
    }
    // As in the sub-blocks, the largest scale maps to -128, the side with one more level.
    block.d_f16 = f32_to_f16(extreme / -128.0f);
    const float d = f16_to_f32(block.d_f16);
    uint8_t q[256];
    for (int j = 0; j < 16; ++j) {
      const int scale = d != 0.0f ? round_clamp(fits[j] / d, -128, 127) : 0;
      block.scales[j] = static_cast<int8_t>(scale);
      const float dl = d * scale;
      for (int i = 0; i < 16; ++i)
        q[16 * j + i] = static_cast<uint8_t>((dl != 0.0f ? round_clamp(xb[16 * j + i] / dl, -32, 31) : 0) + 32);
    }
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const int q0 = q[128 * h + l], q1 = q[128 * h + 32 + l];
        const int q2 = q[128 * h + 64 + l], q3 = q[128 * h + 96 + l];
        block.ql[64 * h + l] = static_cast<uint8_t>((q0 & 0x0f) | ((q2 & 0x0f) << 4));
        block.ql[64 * h + 32 + l] = static_cast<uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
        block.qh[32 * h + l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
      }
    }
  }
}

void quantize_row_q8k(const float* x, BlockQ8K* out, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    BlockQ8K& block = out[b];
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(xb[i]));
    block.d = amax / 127.0f;
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) {
        const int q = round_clamp(xb[16 * j + i] * inverse, -127, 127);
        block.qs[16 * j + i] = static_cast<int8_t>(q);
        sum += q;
      }
      block.bsums[j] = static_cast<int16_t>(sum);
    }
  }
}

void dequantize_row_q4k(const BlockQ4K* blocks, float* y, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    uint8_t q[256], scales[8], mins[8];
    unpack_q4k_quants(blocks[b], q);
    unpack_k4_scales(blocks[b].scales, scales, mins);
    const float d = f16_to_f32(blocks[b].d_f16), dmin = f16_to_f32(blocks[b].dmin_f16);
    for (int j = 0; j < 8; ++j) {
      // (d * scale) * q - dmin * min, in this order: the order llama.cpp decodes in.
      const float dl = d * scales[j], ml = dmin * mins[j];
      for (int i = 0; i < 32; ++i) y[b * 256 + 32 * j + i] = dl * q[32 * j + i] - ml;
    }
  }
}

void dequantize_row_q5k(const BlockQ5K* blocks, float* y, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    uint8_t q[256], scales[8], mins[8];
    unpack_q5k_quants(blocks[b], q);
    unpack_k4_scales(blocks[b].scales, scales, mins);
    const float d = f16_to_f32(blocks[b].d_f16), dmin = f16_to_f32(blocks[b].dmin_f16);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * scales[j], ml = dmin * mins[j];
      for (int i = 0; i < 32; ++i) y[b * 256 + 32 * j + i] = dl * q[32 * j + i] - ml;
    }
  }
}

void dequantize_row_q6k(const BlockQ6K* blocks, float* y, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    int8_t q[256];
    unpack_q6k_quants(blocks[b], q);
    const float d = f16_to_f32(blocks[b].d_f16);
    for (int i = 0; i < 256; ++i) y[b * 256 + i] = d * blocks[b].scales[i / 16] * q[i];
  }
}

void dequantize_row_q8k(const BlockQ8K* blocks, float* y, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b)
    for (int i = 0; i < 256; ++i) y[b * 256 + i] = blocks[b].d * blocks[b].qs[i];
}

}  // namespace tandem
