// Element types of weights and activations, numbered as GGUF/ggml numbers them so a type id
// read from a file maps straight onto this enum. Quantized types store blocks of
// `block_size` elements in `block_bytes` bytes; a row's byte size is derived from both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace tandem {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
  MXFP4 = 39,
};

struct DTypeTraits {
  std::string_view name;
  int64_t block_size;   // elements per block (1 for plain types)
  int64_t block_bytes;  // bytes per block
  bool supported;       // Tandem can compute with it
};

// Traits of a type id read from a file; nullopt when the id is unknown.
std::optional<DTypeTraits> dtype_traits(uint32_t type_id);
DTypeTraits dtype_traits(DType type);
std::string_view dtype_name(DType type);
// Parses "F32", "q8_0", ... (case-insensitive); nullopt when unknown.
std::optional<DType> dtype_from_name(std::string_view name);

// Elements per block and bytes per block of a type, inline: kernels ask for row sizes in
// their inner loops. {0, 0} for an unknown type.
constexpr std::pair<int64_t, int64_t> dtype_block_geometry(DType type) {
  switch (type) {
    case DType::F32:
    case DType::I32: return {1, 4};
    case DType::F16:
    case DType::BF16:
    case DType::I16: return {1, 2};
    case DType::I8: return {1, 1};
    case DType::I64:
    case DType::F64: return {1, 8};
    case DType::Q4_0: return {32, 18};
    case DType::Q4_1: return {32, 20};
    case DType::Q5_0: return {32, 22};
    case DType::Q5_1: return {32, 24};
    case DType::Q8_0: return {32, 34};
    case DType::Q8_1: return {32, 36};
    case DType::Q2_K: return {256, 84};
    case DType::Q3_K: return {256, 110};
    case DType::Q4_K: return {256, 144};
    case DType::Q5_K: return {256, 176};
    case DType::Q6_K: return {256, 210};
    case DType::Q8_K: return {256, 292};
    case DType::IQ4_NL: return {32, 18};
    case DType::MXFP4: return {32, 17};
    case DType::IQ4_XS: return {256, 136};
  }
  return {0, 0};
}

// Bytes of `n_elements` elements of `type`; n_elements must be a multiple of the block size.
inline int64_t dtype_row_bytes(DType type, int64_t n_elements) {
  const auto [block_size, block_bytes] = dtype_block_geometry(type);
  return block_size == 0 ? 0 : n_elements / block_size * block_bytes;
}

// Quantized block layouts (GGUF specification).
constexpr int64_t kQ8_0BlockSize = 32;
struct BlockQ8_0 {
  uint16_t scale_f16;  // d: fp16 scale
  int8_t quants[32];   // value = d * q
};
static_assert(sizeof(BlockQ8_0) == 34);

constexpr int64_t kQ4_0BlockSize = 32;
struct BlockQ4_0 {
  uint16_t scale_f16;   // d: fp16 scale
  uint8_t nibbles[16];  // element i (i<16) is the low nibble of byte i, element i+16 the high
};                      // value = d * (nibble - 8)
static_assert(sizeof(BlockQ4_0) == 18);

}  // namespace tandem
