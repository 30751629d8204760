// llama.cpp's general.file_type (llama_ftype) for a GGUF whose matrices are mostly `type`,
// or the Q4_K_M mix: what gen-model and convert write, so llama.cpp names the file right.
#pragma once

#include <cstdint>
#include <optional>

#include "base/dtype.h"

namespace tandem {

constexpr uint32_t kLlamaFileTypeQ3KM = 12;  // MOSTLY_Q3_K_M, the Q3_K_M mix
constexpr uint32_t kLlamaFileTypeQ5KM = 17;  // MOSTLY_Q5_K_M, the Q5_K_M mix

// nullopt for a type no llama_ftype stands for.
inline std::optional<uint32_t> llama_file_type(DType type, bool q4_k_m = false) {
  if (q4_k_m) return 15;  // MOSTLY_Q4_K_M
  switch (type) {
    case DType::F32: return 0;
    case DType::F16: return 1;
    case DType::Q4_0: return 2;
    case DType::Q8_0: return 7;
    case DType::Q5_0: return 8;
    case DType::Q5_1: return 9;
    case DType::Q2_K: return 10;  // MOSTLY_Q2_K
    case DType::Q3_K: return 11;  // MOSTLY_Q3_K_S: every matrix Q3_K
    case DType::Q4_K: return 14;  // MOSTLY_Q4_K_S: every matrix Q4_K
    case DType::Q5_K: return 16;  // MOSTLY_Q5_K_S
    case DType::Q6_K: return 18;  // MOSTLY_Q6_K
    case DType::IQ4_NL: return 25;
    case DType::IQ4_XS: return 30;  // MOSTLY_IQ4_XS
    case DType::BF16: return 32;
    case DType::MXFP4: return 38;  // MOSTLY_MXFP4_MOE: llama.cpp has no dense MXFP4 file type
    default: return std::nullopt;
  }
}

}  // namespace tandem
