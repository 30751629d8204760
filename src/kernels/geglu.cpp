// GeGLU (see geglu.h). Each element on its own: the result never depends on the batch.
#include "kernels/geglu.h"

#include <cmath>

namespace tandem {

float gelu_tanh(float x) {
  constexpr float kSqrtTwoOverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrtTwoOverPi * (x + 0.044715f * x * x * x)));
}

void geglu_row(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
}

}  // namespace tandem
