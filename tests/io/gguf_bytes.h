// Test helpers for GGUF: a byte builder for hand-made (often malformed) files, and a check
// that parsing throws InputError whose message contains an expected fragment.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"
#include "io/gguf_file.h"

namespace tandem::test {

class GgufBytes {
 public:
  std::vector<uint8_t> bytes;

  GgufBytes& raw(std::string_view text) { return append(text.data(), text.size()); }
  template <typename T>
  GgufBytes& put(T value) {
    return append(&value, sizeof(T));
  }
  // resize + memcpy rather than vector::insert, which GCC 12 -O3 reports falsely
  // (-Warray-bounds / -Wstringop-overflow in its reallocation path, bug 107852).
  GgufBytes& append(const void* data, size_t n) {
    const size_t old = bytes.size();
    bytes.resize(old + n);
    if (n > 0) std::memcpy(bytes.data() + old, data, n);
    return *this;
  }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& str(std::string_view text) { return u64(text.size()).raw(text); }
  // Magic, version and the two counts.
  GgufBytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    return raw("GGUF").u32(version).u64(n_tensors).u64(n_kv);
  }
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  // A tensor info; dims in GGUF order (innermost first).
  GgufBytes& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad_to(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
};

// Parses `bytes`, expecting InputError with `fragment` in its message.
inline void expect_parse_error(std::span<const uint8_t> bytes, const std::string& fragment) {
  try {
    GgufFile::parse(bytes);
    ADD_FAILURE() << "parse succeeded; expected an error containing '" << fragment << "'";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
        << "message: " << error.what() << "\nexpected fragment: " << fragment;
  }
}

}  // namespace tandem::test
