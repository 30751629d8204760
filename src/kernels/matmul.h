// matmul: out[n_tokens, n_out] = x[n_tokens, n_in] · weight[n_out, n_in]ᵀ for any computable
// weight type. Work is split across threads by weight rows (never along n_in), in tiles of
// rows so each weight tile is read from memory once and reused for every token of the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "base/tensor_view.h"
#include "base/thread_pool.h"
#include "kernels/dot.h"
#include "kernels/dot_kquants.h"

namespace tandem {

// Reusable buffers for matmul (activations quantized once per call, not per weight row).
struct MatmulScratch {
  std::vector<ActivationBlockQ8> quantized;     // [n_tokens, n_in / 32]
  std::vector<ActivationBlockQ8K> quantized_k;  // [n_tokens, n_in / 256] for k-quant weights
};

void matmul(const TensorView& weight, const float* x, int64_t n_tokens, float* out, ThreadPool& pool,
            MatmulScratch& scratch);

}  // namespace tandem
