// Scalar double-accumulating reference kernels (see reference_kernels.h).
#include "kernels/ref/reference_kernels.h"

#include <cmath>
#include <vector>

#include "base/quant.h"

namespace tandem::ref {

void matmul(const TensorView& weight, const float* x, int64_t n_tokens, float* out) {
  const int64_t n_out = weight.n_rows();
  const int64_t n_in = weight.row_length();
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    dequantize_row(weight.dtype, weight.row(r), row.data(), n_in);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double sum = 0.0;
      for (int64_t c = 0; c < n_in; ++c) sum += static_cast<double>(row[c]) * x[t * n_in + c];
      out[t * n_out + r] = static_cast<float>(sum);
    }
  }
}

void rmsnorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const double scale = 1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * scale * weight[i]);
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, int64_t position, float freq_base) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    for (int64_t i = 0; i < rope_dims / 2; ++i) {
      const double angle =
          static_cast<double>(position) * std::pow(static_cast<double>(freq_base), -2.0 * i / rope_dims);
      const double c = std::cos(angle), s = std::sin(angle);
      const double a = head[2 * i], b = head[2 * i + 1];
      head[2 * i] = static_cast<float>(a * c - b * s);
      head[2 * i + 1] = static_cast<float>(a * s + b * c);
    }
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace tandem::ref
