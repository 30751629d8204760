// KvTypes: the element types the KV cache stores K and V in (F32, F16, BF16, Q8_0, Q4_0, as
// llama.cpp's --cache-type-k/-v), their names on the command line, and which a model's head
// size allows. The storage itself is KvCache's; the arithmetic on it is the attention kernels'.
#pragma once

#include <string>
#include <string_view>

#include "base/dtype.h"
#include "kv/kv_shape.h"

namespace tandem {

struct KvTypes {
  DType k = DType::F32;
  DType v = DType::F32;
  bool operator==(const KvTypes&) const = default;
};

// What an engine stores unless told otherwise: F16 K and V (half the bytes of F32; KL divergence
// and perplexity against F32 in bench/RESULTS.md).
constexpr KvTypes kDefaultKvTypes{DType::F16, DType::F16};

// "f32", "f16", "bf16", "q8_0", "q4_0" (any case) -> the type; InputError for anything else.
DType parse_kv_type(std::string_view name);
std::string_view kv_type_name(DType type);  // lower case, as parse_kv_type takes it
// "K f16, V q8_0".
std::string kv_types_description(const KvTypes& types);

// InputError unless both types are KV cache types and the model's head size suits them: the
// block types need whole blocks of 32 per head, and every type but F32 a head of at most 1024.
void check_kv_types(const KvShape& shape, const KvTypes& types);

}  // namespace tandem
