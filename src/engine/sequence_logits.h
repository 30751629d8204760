// Next-token logits at every position of one token sequence, teacher forced: the sequence is
// fed as one prefill (in pieces of batch_tokens when longer), every row asking for logits.
// Forward is batch-invariant, so row i equals what decoding token i after tokens 0..i-1 gives,
// bit for bit: this is what agreement checks against another engine compare (bench/agreement).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_types.h"
#include "model/forward.h"

namespace tandem {

// Returns [n_tokens, vocab_size] row-major: row i is the distribution after tokens[0..i].
// InputError for an empty sequence, one longer than the model's context, or an id outside
// the vocabulary. The KV cache (K and V as kv_types) is the function's own.
std::vector<float> sequence_logits(Forward& forward, std::span<const int32_t> tokens, int64_t batch_tokens,
                                   const KvTypes& kv_types);

}  // namespace tandem
