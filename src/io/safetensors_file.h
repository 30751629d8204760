// SafetensorsFile: a parsed Hugging Face .safetensors file (u64 header length, JSON header,
// raw data) whose tensor views point into the memory map; SafetensorsCheckpoint: one file or
// the shards named by model.safetensors.index.json, looked up by tensor name. Validation is
// as strict as the GGUF reader's: anything malformed throws InputError with one line.
// Reads F32, F16, BF16 and U8 (raw bytes: gpt-oss's MXFP4 blocks and scales).
// No model logic lives here (which tensors a Llama needs is src/model's business).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/tensor_view.h"
#include "io/mapped_file.h"

namespace tandem {

struct SafetensorsTensor {
  std::string name;
  // data points into the bytes; shape outermost first, as stored. U8 has no DType (GGUF has no
  // such type): its view is typed I8, one byte an element and not computable, so no kernel or
  // dequantizer accepts it by accident; stored_dtype says what the bytes are.
  TensorView view;
  std::string_view stored_dtype;  // "F32", "F16", "BF16" or "U8", as the header names it
  uint64_t begin = 0;             // data_offsets, relative to the start of the data section
  uint64_t end = 0;

  bool is_float() const { return stored_dtype != "U8"; }
};

class SafetensorsFile {
 public:
  // Maps and parses `path`. Throws InputError ("<path>: <problem>") on anything malformed.
  static SafetensorsFile open(const std::string& path);
  // Parses bytes owned by the caller (tests, fuzzing); views point into `bytes`.
  static SafetensorsFile parse(std::span<const uint8_t> bytes);

  // The optional "__metadata__" object (string -> string).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In data order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;
  // The map backing the views (null for parse()); keep it alive as long as the views.
  std::shared_ptr<const MappedFile> mapping() const { return mapping_; }

 private:
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::shared_ptr<const MappedFile> mapping_;
};

// The weights of a Hugging Face model folder: `model.safetensors`, or the shards listed in
// `model.safetensors.index.json` (weight_map: tensor name -> shard file in the same folder).
class SafetensorsCheckpoint {
 public:
  // Throws InputError when neither file exists, the index is malformed, a shard is missing
  // (named), a tensor is not in the shard the index names, or two shards hold one name.
  static SafetensorsCheckpoint open(const std::string& dir);

  const SafetensorsTensor* find(const std::string& name) const;
  std::vector<std::string> names() const;
  // Every map backing the views; keep them alive as long as the views.
  std::vector<std::shared_ptr<const MappedFile>> mappings() const;
  // The file `name` was found in (for messages).
  const std::string& file_of(const std::string& name) const;
  // The map holding `name`'s data (null when not found): to release pages once copied.
  std::shared_ptr<const MappedFile> mapping_of(const std::string& name) const;

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::vector<std::string> paths_;
  std::map<std::string, std::pair<size_t, const SafetensorsTensor*>> tensors_;  // name -> (file, tensor)
};

}  // namespace tandem
