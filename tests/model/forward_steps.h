// Test helpers for forward-pass tests of one sequence: seeded random token ids, and a run that
// feeds them in batches of a given step (prefill, chunked prefill, decode) over a KV pool of
// scrambled blocks, every row asking for logits. Shared by the sliding-window, gemma3 and long-context tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/forward.h"

namespace tandem::test_reference {

inline std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> tokens(static_cast<size_t>(n));
  for (int32_t& token : tokens) token = id(rng);
  return tokens;
}

// Feeds `tokens` as one sequence in batches of `step` tokens over a pool of blocks of
// `block_size` that keeps every position (blocks in scrambled order), in a cache of `types`,
// every row asking for logits; returns [n_tokens, vocab_size].
inline std::vector<float> run_in_steps(Forward& forward, const std::vector<int32_t>& tokens, int64_t step,
                                       int32_t block_size = 4, KvTypes types = {}) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t n_blocks = (n + block_size - 1) / block_size;
  KvCache cache(forward.model().config.kv_shape(), n_blocks, block_size, types);
  std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) blocks[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(5));
  std::vector<float> logits;
  Batch batch;
  for (int64_t begin = 0; begin < n; begin += step) {
    batch.clear();
    const int32_t seq = batch.add_sequence(blocks);
    for (int64_t p = begin; p < std::min(n, begin + step); ++p)
      batch.add(tokens[static_cast<size_t>(p)], static_cast<int32_t>(p), seq, true);
    const std::span<const float> out = forward.run(batch, cache);
    logits.insert(logits.end(), out.begin(), out.end());
  }
  return logits;
}

}  // namespace tandem::test_reference
