// gpt-oss's (GptOssForCausalLM's) tensors beyond the common attention, read from a Hugging Face
// checkpoint into a LayerWeights: o_proj's bias, the sinks, the router with its bias, and the
// experts with their biases, in the bf16 layout or the MXFP4 one OpenAI released.
#pragma once

#include <string>

#include "model/hf_tensor_reader.h"
#include "model/model.h"

namespace tandem {

// `prefix` is "model.layers.N."; `mxfp4_config`: config.json's quantization_config says mxfp4
// (the MXFP4 layout is also taken whenever the *_blocks tensors are there). Throws InputError
// naming the tensor for anything missing, misshapen or of the wrong type.
void read_hf_gpt_oss_layer(HfTensorReader& reader, const ModelConfig& c, bool mxfp4_config, const std::string& prefix,
                           LayerWeights& layer);

}  // namespace tandem
