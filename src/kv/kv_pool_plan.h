// KvPoolPlan: how many KV blocks a pool gets from the configuration (--kv-memory, or
// --parallel full contexts), in the real bytes of the chosen K/V types, and the one line that
// says so at start-up. Plain arithmetic, no allocation: the Engine sizes its pool with it and
// `tandem info` prints it.
#pragma once

#include <cstdint>
#include <string>

#include "kv/kv_shape.h"
#include "kv/kv_types.h"

namespace tandem {

struct KvPoolPlan {
  int64_t n_blocks = 0;
  int32_t block_size = 0;
  int64_t bytes_per_token = 0;     // KvCache::bytes_per_token(shape, types)
  int64_t bytes_per_block = 0;     // bytes_per_token x block_size
  int64_t blocks_per_context = 0;  // the most blocks one context_length-token sequence holds at once
  int64_t full_contexts = 0;       // n_blocks / blocks_per_context: full sequences the pool holds at once
  int64_t window = 0;              // > 0: every layer's sliding window (blocks behind it are given back)
  KvTypes types;
};

// kv_memory_bytes > 0: as many whole blocks as fit in it; else max_seqs full contexts.
// window > 0 (every layer local): a sequence holds only the blocks of its window and of one
// step's tokens (at most max_step_tokens; the scheduler gives a prompt its blocks a chunk at a
// time and drops those behind the window), so blocks_per_context is that, when smaller.
// Does not check that one context fits (the Engine does: a configuration error).
KvPoolPlan plan_kv_pool(const KvShape& shape, const KvTypes& types, int32_t block_size, int64_t context_length,
                        int64_t kv_memory_bytes, int32_t max_seqs, int64_t window = 0, int64_t max_step_tokens = 0);

// The most blocks of block_size a sequence holds while computing max_step_tokens positions at
// once with only the last `window` positions readable: those positions and the window-1 before
// the first of them, a run that may start anywhere inside a block.
int64_t windowed_blocks_per_sequence(int32_t block_size, int64_t window, int64_t max_step_tokens);

// "KV pool: 1024 blocks of 16 tokens, 45056 bytes/token (K f16, V f16), fits 8 full contexts of 2048"
// (with a window: "..., fits 8 full contexts of 2048 (window 512: 40 blocks each)")
std::string describe_kv_pool(const KvPoolPlan& plan, int64_t context_length);

}  // namespace tandem
