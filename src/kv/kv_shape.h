// KvShape: what the KV cache needs to know of a model — layers, K/V heads, head size — so
// that kv/ sizes its storage without depending on model/ (ModelConfig::kv_shape() gives it).
#pragma once

#include <cstdint>

namespace tandem {

struct KvShape {
  int64_t n_layers = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;

  int64_t kv_width() const { return n_kv_heads * head_dim; }  // floats of one token's K (or V) per layer
};

}  // namespace tandem
