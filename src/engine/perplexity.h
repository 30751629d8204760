// Perplexity of a token sequence, scored the way llama.cpp's perplexity tool scores it so
// numbers compare across engines: cut into ⌊n / ctx⌋ chunks of ctx tokens, each chunk's first
// token replaced by BOS, and in each chunk the logits at positions ctx/2 … ctx−2 scored
// against the next token. A chunk may be fed in pieces of `batch_tokens`: same result.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/forward.h"

namespace tandem {

struct PerplexityResult {
  double perplexity = 0.0;
  double uncertainty = 0.0;  // one standard error of the perplexity
  int64_t chunks = 0;
  int64_t scored_tokens = 0;
};

// `forward` must allow batches of batch_tokens; bos_id < 0 (no BOS) leaves first tokens as
// they are; the KV cache stores K and V as kv_types. on_chunk(i, running perplexity) after
// each chunk.
PerplexityResult compute_perplexity(Forward& forward, std::span<const int32_t> tokens, int64_t ctx,
                                    int64_t batch_tokens, int32_t bos_id, const KvTypes& kv_types,
                                    const std::function<void(int64_t, double)>& on_chunk = {});

// The pieces compute_perplexity is made of, shared with the KV type comparison (kv_divergence.h).
namespace perplexity_detail {

// InputError unless ctx suits the model and the text holds a chunk; returns the chunk count.
int64_t check_chunks(const ModelConfig& config, std::span<const int32_t> tokens, int64_t ctx);

// Chunk `chunk` of the text, its first token replaced by BOS when bos_id >= 0.
std::vector<int32_t> chunk_tokens(std::span<const int32_t> tokens, int64_t ctx, int64_t chunk, int32_t bos_id);

// Feeds one chunk through forward over `cache` (which holds at least ctx slots), batch_tokens
// at a time, and calls on_scored(logits row [vocab], next token) for each scored position in order.
void score_chunk(Forward& forward, KvCache& cache, const std::vector<int32_t>& chunk, int64_t batch_tokens,
                 const std::function<void(const float*, int32_t)>& on_scored);

// -log softmax(logits)[target], in double.
double negative_log_likelihood(const float* logits, int64_t vocab, int32_t target);

// Running sums of the scored tokens' negative log-likelihoods.
struct NllSums {
  double sum = 0.0, sum_squared = 0.0;
  int64_t count = 0;

  void add(double nll) {
    sum += nll;
    sum_squared += nll * nll;
    ++count;
  }
  PerplexityResult result(int64_t chunks) const;
};

}  // namespace perplexity_detail

}  // namespace tandem
