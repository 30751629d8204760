// GgufWriter: builds a GGUF v3 file (metadata in insertion order, tensors aligned to
// general.alignment, default 32), streaming tensor bytes on demand. Used by gen-model, convert
// and tests that make model files. Reading is io/gguf_file.h.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf_file.h"

namespace tandem {

class GgufWriter {
 public:
  // Fills exactly the tensor's bytes when the file is written; lets a writer stream tensors
  // too large to hold all at once (only one tensor's bytes exist at a time).
  using TensorSource = std::function<void(std::span<uint8_t> out)>;

  // Sets `key`; setting an existing key replaces its value in its original position.
  void set(const std::string& key, GgufValue value);
  // `bytes` holds the tensor's data in `dtype`, rows contiguous; shape outermost first.
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  // Streaming form: `source` is called once per to_bytes()/write(), in tensor order.
  void add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, TensorSource source);
  std::vector<uint8_t> to_bytes() const;
  // Writes atomically-enough for our use (temp file then rename). Throws InputError on I/O.
  void write(const std::string& path) const;

  // Bytes of a tensor of `dtype` and `shape` (outermost first) as stored in the file.
  static int64_t tensor_bytes(DType dtype, const std::vector<int64_t>& shape);

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    TensorSource source;
  };
  uint64_t alignment() const;
  // Header, metadata and tensor infos, padded to the start of the data section.
  std::vector<uint8_t> header_bytes() const;
  // Produces the whole file in order, chunk by chunk.
  void emit(const std::function<void(std::span<const uint8_t>)>& sink) const;

  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace tandem
