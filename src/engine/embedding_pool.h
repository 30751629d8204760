// EmbeddingPool: an embedding request's (Pooling::Mean, Last or Tokens) vector as the forward
// passes compute its prompt: each position's final residual row final-normed, then summed
// (mean), kept (last) or kept per position (tokens: llama-server's pooling none). The sum is in double and in position
// order, so chunking, batching and a preemption's recompute never change the result. No sampling, no events: the engine
// ends the request with result().
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/request.h"
#include "model/model.h"

namespace tandem {

class EmbeddingPool {
 public:
  EmbeddingPool() = default;  // not an embedding request: holds nothing
  EmbeddingPool(Pooling pooling, int64_t d_model, int64_t n_prompt);

  // The rows of one forward pass, positions from first_position on: residual_rows
  // [n, d_model] in position order. Positions pooled before (recomputed after a preemption)
  // and positions past the prompt are skipped; Last normalises only the last prompt position.
  void add_rows(const Model& model, int64_t first_position, std::span<const float> residual_rows, int64_t n_prompt);
  // The embedding once every prompt position is pooled: [d_model], the mean or the last row;
  // Tokens: [n_prompt, d_model], each position's row.
  std::vector<float> result(int64_t n_prompt) const;

 private:
  Pooling pooling_ = Pooling::None;
  std::vector<double> pooled_;  // [d_model] the running sum (mean) or the last row (last); [n_prompt, d_model] (tokens)
  int64_t pooled_positions_ = 0;   // positions [0, pooled_positions_) are in pooled_
  std::vector<float> normed_row_;  // [d_model] scratch
};

}  // namespace tandem
