// Perplexity of a token sequence, scored the way llama.cpp's perplexity tool scores it so
// numbers compare across engines: cut into ⌊n / ctx⌋ chunks of ctx tokens, each chunk's first
// token replaced by BOS, and in each chunk the logits at positions ctx/2 … ctx−2 scored
// against the next token. A chunk may be fed in pieces of `batch_tokens`: same result.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "model/forward.h"

namespace tandem {

struct PerplexityResult {
  double perplexity = 0.0;
  double uncertainty = 0.0;  // one standard error of the perplexity
  int64_t chunks = 0;
  int64_t scored_tokens = 0;
};

// `forward` must allow batches of batch_tokens; bos_id < 0 (no BOS) leaves first tokens as
// they are. on_chunk(i, running perplexity) after each chunk.
PerplexityResult compute_perplexity(Forward& forward, std::span<const int32_t> tokens, int64_t ctx,
                                    int64_t batch_tokens, int32_t bos_id,
                                    const std::function<void(int64_t, double)>& on_chunk = {});

}  // namespace tandem
