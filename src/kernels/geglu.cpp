// GeGLU and soft-capping (see geglu.h): the active level's dispatch and the scalar loops.
#include "kernels/geglu.h"

#include <cmath>

#include "kernels/kernel_table.h"

namespace tandem {

float gelu_tanh(float x) {
  constexpr float kSqrtTwoOverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrtTwoOverPi * (x + 0.044715f * x * x * x)));
}

void geglu_row(const float* gate, const float* up, int64_t n, float* out) { kernel_table().geglu(gate, up, n, out); }

void softcap_row(const float* x, int64_t n, float cap, float* out) { kernel_table().softcap(x, n, cap, out); }

namespace portable {

void geglu_row(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

void softcap_row(const float* x, int64_t n, float cap, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace portable
}  // namespace tandem
