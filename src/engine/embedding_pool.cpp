// Final norm and pooling of an embedding request's rows (see embedding_pool.h).
#include "engine/embedding_pool.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/kernel_table.h"

namespace tandem {

EmbeddingPool::EmbeddingPool(Pooling pooling, int64_t d_model, int64_t n_prompt)
    : pooling_(pooling),
      pooled_(static_cast<size_t>((pooling == Pooling::Tokens ? n_prompt : 1) * d_model), 0.0),
      normed_row_(static_cast<size_t>(d_model)) {}

void EmbeddingPool::add_rows(const Model& model, int64_t first_position, std::span<const float> residual_rows,
                             int64_t n_prompt) {
  const ModelConfig& c = model.config;
  const int64_t d = c.d_model;
  const auto n_rows = static_cast<int64_t>(residual_rows.size()) / d;
  const RmsnormFn rmsnorm = kernel_table().rmsnorm;  // the forward pass's own final norm
  const bool last_only = pooling_ == Pooling::Last;
  for (int64_t r = 0; r < n_rows; ++r) {
    const int64_t position = first_position + r;
    // Recomputed after a preemption (already in the sum), or not a prompt position.
    if (position < pooled_positions_ || position >= n_prompt) continue;
    // Last pooling normalises only the position it keeps.
    if (last_only && position != n_prompt - 1) continue;
    // A Mean or Tokens request never reuses cached rows (Scheduler::admit), so it sees every position;
    // a Last request may start past a cached prefix.
    TANDEM_ASSERT(position == pooled_positions_ || last_only);
    rmsnorm(residual_rows.data() + r * d, model.weights.output_norm.f32(), d, c.rms_norm_eps, normed_row_.data());
    if (pooling_ == Pooling::Mean) {
      for (int64_t i = 0; i < d; ++i) pooled_[static_cast<size_t>(i)] += normed_row_[static_cast<size_t>(i)];
    } else if (pooling_ == Pooling::Tokens) {
      std::copy(normed_row_.begin(), normed_row_.end(), pooled_.begin() + static_cast<std::ptrdiff_t>(position * d));
    } else {
      std::copy(normed_row_.begin(), normed_row_.end(), pooled_.begin());
    }
    pooled_positions_ = position + 1;
  }
}

std::vector<float> EmbeddingPool::result(int64_t n_prompt) const {
  TANDEM_ASSERT(pooled_positions_ == n_prompt);
  const double scale = pooling_ == Pooling::Mean ? 1.0 / static_cast<double>(n_prompt) : 1.0;
  std::vector<float> embedding(pooled_.size());
  for (size_t i = 0; i < pooled_.size(); ++i) embedding[i] = static_cast<float>(pooled_[i] * scale);
  return embedding;
}

}  // namespace tandem
