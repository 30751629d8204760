// Row kernels (see elementwise.h). Norm and softmax sums run in double, in index order:
// cheap next to the matrix products, and it keeps them exact enough that prefill and decode
// paths agree bit for bit.
#include "kernels/elementwise.h"

#include <cmath>

#include "kernels/kernel_table.h"

namespace tandem {

void rmsnorm_row(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_angles(int64_t position, int64_t rope_dims, float freq_base, float* cos_out, float* sin_out) {
  rope_angles(position, rope_dims, freq_base, nullptr, cos_out, sin_out);
}

void rope_angles(int64_t position, int64_t rope_dims, float freq_base, const float* freq_factors, float* cos_out,
                 float* sin_out) {
  for (int64_t i = 0; i < rope_dims / 2; ++i) {
    double frequency = std::pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(i) / rope_dims);
    if (freq_factors != nullptr) frequency /= freq_factors[i];
    const double angle = static_cast<double>(position) * frequency;
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void rope_apply(float* x, int64_t n_heads, int64_t head_dim, int64_t rope_dims, const float* cos_table,
                const float* sin_table) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* head = x + h * head_dim;
    for (int64_t i = 0; i < rope_dims / 2; ++i) {
      const float a = head[2 * i], b = head[2 * i + 1];
      head[2 * i] = a * cos_table[i] - b * sin_table[i];
      head[2 * i + 1] = a * sin_table[i] + b * cos_table[i];
    }
  }
}

void swiglu_row(const float* gate, const float* up, int64_t n, float* out) { kernel_table().swiglu(gate, up, n, out); }

namespace portable {
void swiglu_row(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}
}  // namespace portable

void softmax_row(float* x, int64_t n) {
  float max_value = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max_value = std::fmax(max_value, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inverse;
}

}  // namespace tandem
