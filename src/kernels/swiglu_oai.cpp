// swiglu_oai_row (see swiglu_oai.h): the active level's dispatch and the scalar loop.
#include "kernels/swiglu_oai.h"

#include <algorithm>
#include <cmath>

#include "kernels/kernel_table.h"

namespace tandem {

void swiglu_oai_row(const float* gate, const float* up, int64_t n, float* out) {
  kernel_table().swiglu_oai(gate, up, n, out);
}

namespace portable {

void swiglu_oai_row(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], kSwigluOaiLimit);
    const float u = std::clamp(up[i], -kSwigluOaiLimit, kSwigluOaiLimit);
    out[i] = g / (1.0f + std::exp(-kSwigluOaiAlpha * g)) * (u + 1.0f);
  }
}

}  // namespace portable
}  // namespace tandem
