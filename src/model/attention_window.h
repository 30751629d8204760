// Sliding-window attention as the model config describes it: which layers are local, the
// checks a loaded config must pass, and the one-line summary `tandem info` prints. The
// windowed attention itself is in the forward pass; what the KV cache may forget because of it
// is the BlockManager's (kv/block_manager.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace tandem {

// Gemma's interleaving: in every run of `period` layers the last is global, the rest local
// (period 6: layers 5, 11, 17, ... global). [n_layers], 1 = local. period 0: all local.
std::vector<uint8_t> interleaved_local_layers(int64_t n_layers, int64_t period);

// Throws InputError naming the first inconsistent window setting.
void validate_attention_window(const ModelConfig& config);

// "none", or e.g. "4096 positions, layers 0-4, 6-10 local (every 6th global), local RoPE base 10000".
std::string describe_attention_window(const ModelConfig& config);

}  // namespace tandem
