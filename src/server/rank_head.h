// RankHead: a reranker's classification head read from its GGUF — llama.cpp's rank pooling
// for a causal model: the last prompt position's final-norm hidden state h (the engine's
// Pooling::Last), then, when the file has them, cls.weight / cls.bias (a dense layer and tanh)
// and cls.output.weight / cls.output.bias: the scores. /rerank serves only models with one.
// Reads F32 and F16 tensors; knows nothing of the engine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tandem::server {

struct RankHead {
  int64_t d_model = 0;
  std::vector<float> dense, dense_bias;  // cls.weight [d_model, d_model], cls.bias [d_model]; empty: none
  std::vector<float> out, out_bias;      // cls.output.weight [n_out, d_model], cls.output.bias [n_out]
  int64_t n_out = 0;                     // 0: the model has no head (it cannot rank)

  bool empty() const { return n_out == 0; }
  // The head over one pooled state [d_model]: n_out scores (the first is /rerank's).
  std::vector<float> scores(std::span<const float> pooled) const;
};

// The head in the GGUF at `path`; empty when it has no cls.output.weight. InputError for a head
// of another width than `d_model` or of a type other than F32 and F16.
RankHead read_rank_head(const std::string& path, int64_t d_model);

}  // namespace tandem::server
