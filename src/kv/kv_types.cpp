// KvTypes names and checks (see kv_types.h).
#include "kv/kv_types.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "kernels/attention.h"

namespace tandem {

namespace {
constexpr DType kKvTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0};
}  // namespace

DType parse_kv_type(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (DType type : kKvTypes)
    if (kv_type_name(type) == lower) return type;
  TANDEM_CHECK_INPUT(false, "unknown KV cache type '{}' (f32, f16, bf16, q8_0 or q4_0)", name);
  return DType::F32;
}

std::string_view kv_type_name(DType type) {
  switch (type) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::Q8_0: return "q8_0";
    case DType::Q4_0: return "q4_0";
    default: return "unsupported";
  }
}

std::string kv_types_description(const KvTypes& types) {
  return fmt::format("K {}, V {}", kv_type_name(types.k), kv_type_name(types.v));
}

void check_kv_types(const KvShape& shape, const KvTypes& types) {
  for (DType type : {types.k, types.v}) {
    TANDEM_CHECK_INPUT(kv_type_supported(type), "the KV cache cannot store {} (f32, f16, bf16, q8_0 or q4_0)",
                       dtype_name(type));
    const int64_t block = dtype_block_geometry(type).first;
    TANDEM_CHECK_INPUT(shape.head_dim % block == 0,
                       "KV cache type {} stores blocks of {} along the head, but the model's head_dim is {}",
                       kv_type_name(type), block, shape.head_dim);
    TANDEM_CHECK_INPUT(type == DType::F32 || shape.head_dim <= kMaxConvertedHeadDim,
                       "KV cache type {} takes heads of at most {} (head_dim is {}); use f32", kv_type_name(type),
                       kMaxConvertedHeadDim, shape.head_dim);
  }
}

}  // namespace tandem
