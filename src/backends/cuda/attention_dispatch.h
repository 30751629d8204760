// What both paged-attention kernels (paged_attention.cu's tile kernel, warp_attention.cu)
// check and how they pick their instance: the shapes they take, and the KV cache type as a
// template argument. Host code only.
#pragma once

#include <cstdint>
#include <string>

#include "backends/cuda/block_dequant.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/paged_attention.h"
#include "base/dtype.h"

namespace tandem::cuda {

// Throws CudaError naming `caller` unless F16/F32 K/V rows are naturally aligned (the kernels
// read an element with one 2- or 4-byte load), n_heads is a whole group of at most
// kMaxAttentionGroup query heads per KV head, head_dim is 1..kMaxAttentionHeadDim in whole
// blocks of the KV type, and the cache has blocks. Returns the group.
inline int64_t checked_attention_group(const char* caller, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                       const PagedKv& kv) {
  const int64_t align = kv.type == DType::F32 ? 4 : (kv.type == DType::F16 ? 2 : 1);
  const bool aligned = kv.key_row_bytes % align == 0 && kv.value_row_bytes % align == 0 &&
                       reinterpret_cast<uintptr_t>(kv.keys) % align == 0 &&
                       reinterpret_cast<uintptr_t>(kv.values) % align == 0;
  if (!aligned) throw CudaError(std::string(caller) + ": F16/F32 K/V rows must be 2-/4-byte aligned");
  const int64_t group = n_kv_heads > 0 ? n_heads / n_kv_heads : 0;
  const bool shapes_ok = group >= 1 && group * n_kv_heads == n_heads && group <= kMaxAttentionGroup && head_dim >= 1 &&
                         head_dim <= kMaxAttentionHeadDim && head_dim % cuda_block_elements(kv.type) == 0 &&
                         kv.block_size > 0;
  if (!shapes_ok)
    throw CudaError(std::string(caller) + ": " + std::to_string(n_heads) + " heads over " + std::to_string(n_kv_heads) +
                    " KV heads of " + std::to_string(head_dim) + " elements (" + std::string(dtype_name(kv.type)) +
                    ") is not a shape the device kernel takes");
  return group;
}

// Calls launch.template operator()<T>() with T the KV cache's type (F32, F16, BF16, Q8_0,
// Q4_0: what block_dequant reads); any other type is a CudaError naming `caller`.
template <typename Launch>
void with_attention_kv_type(const char* caller, DType type, Launch&& launch) {
  switch (type) {
    case DType::F32: launch.template operator()<DType::F32>(); return;
    case DType::F16: launch.template operator()<DType::F16>(); return;
    case DType::BF16: launch.template operator()<DType::BF16>(); return;
    case DType::Q8_0: launch.template operator()<DType::Q8_0>(); return;
    case DType::Q4_0: launch.template operator()<DType::Q4_0>(); return;
    default:
      throw CudaError(std::string(caller) + ": KV type " + std::string(dtype_name(type)) +
                      " is not one the device kernel reads");
  }
}

}  // namespace tandem::cuda
