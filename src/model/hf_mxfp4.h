// The MXFP4 expert tensors of OpenAI's released gpt-oss checkpoints, repacked into Tandem's
// BlockMXFP4 (base/quant32.h, ggml's layout) so they run on the same kernels as a llama.cpp
// MXFP4_MOE GGUF. Both formats hold one E8M0 exponent and 32 E2M1 codes per block with the same
// meaning; only the nibble order differs, so the repack is lossless. No tensor lookup or shape
// checking against config.json happens here (the HF loader's business).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

// One stacked HF tensor pair, row-major over the output dimension: `<name>_blocks` U8
// [n_experts, rows, cols / 32, 16] (byte i of a block: element 2i in the low nibble, 2i + 1 in
// the high one) and `<name>_scales` U8 [n_experts, rows, cols / 32] (value = fp4(code) *
// 2^(scale - 127)).
struct HfMxfp4Tensor {
  std::string name;                           // without the _blocks / _scales suffix, for messages
  const uint8_t* blocks = nullptr;            // [n_experts, rows, cols / 32, 16]
  const uint8_t* scales = nullptr;            // [n_experts, rows, cols / 32]
  int64_t n_experts = 0, rows = 0, cols = 0;  // cols a multiple of 32
};

// Rows first, first + step, ... (n_rows of them) of `expert` as an [n_rows, cols] matrix of
// BlockMXFP4 (dtype_row_bytes(MXFP4, cols) bytes a row). Throws InputError naming
// `<name>_scales` for a scale byte 0xFF, E8M0's NaN, which no BlockMXFP4 can hold.
std::vector<uint8_t> repack_hf_mxfp4_rows(const HfMxfp4Tensor& tensor, int64_t expert, int64_t first, int64_t step,
                                          int64_t n_rows);

// repack_hf_mxfp4_rows for every expert, one matrix each, the experts spread over the cores: the
// repack is a pass over every expert byte (some 12 GB in gpt-oss-20b). On bad scales, the error
// of the lowest expert that has one, as a serial loop would throw.
std::vector<std::vector<uint8_t>> repack_hf_mxfp4_experts(const HfMxfp4Tensor& tensor, int64_t first, int64_t step,
                                                          int64_t n_rows);

}  // namespace tandem
