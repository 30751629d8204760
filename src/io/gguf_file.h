// GgufFile: a parsed GGUF (v2/v3) file — metadata key/values and tensor infos — whose tensor
// views point into the memory map. Every length, count, offset and shape is bounds-checked
// against the file; anything malformed throws InputError with one line naming the problem.
// No model logic lives here (which tensors a llama needs is src/model's business).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/tensor_view.h"
#include "io/mapped_file.h"

namespace tandem {

// general.alignment and its default, shared by the reader and the writer (io/gguf_writer.h).
inline constexpr char kGgufAlignmentKey[] = "general.alignment";
inline constexpr uint64_t kGgufDefaultAlignment = 32;

enum class GgufValueType : uint32_t {
  UInt8 = 0,
  Int8 = 1,
  UInt16 = 2,
  Int16 = 3,
  UInt32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  UInt64 = 10,
  Int64 = 11,
  Float64 = 12,
};

struct GgufValue;
using GgufArray = std::vector<GgufValue>;

// One metadata value. Integers of every width are held as int64_t/uint64_t (by signedness),
// floats as double; `type` keeps the width that was stored so a writer can reproduce it.
struct GgufValue {
  GgufValueType type = GgufValueType::UInt32;
  GgufValueType array_type = GgufValueType::UInt32;  // element type when type == Array
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> data;

  static GgufValue u32(uint32_t v) { return {GgufValueType::UInt32, {}, uint64_t{v}}; }
  static GgufValue i32(int32_t v) { return {GgufValueType::Int32, {}, int64_t{v}}; }
  static GgufValue u64(uint64_t v) { return {GgufValueType::UInt64, {}, v}; }
  static GgufValue f32(float v) { return {GgufValueType::Float32, {}, double{v}}; }
  static GgufValue boolean(bool v) { return {GgufValueType::Bool, {}, v}; }
  static GgufValue string(std::string v) { return {GgufValueType::String, {}, std::move(v)}; }
  static GgufValue array(GgufValueType element_type, GgufArray elements) {
    return {GgufValueType::Array, element_type, std::move(elements)};
  }

  // Typed reads; each returns nullopt when the stored type does not fit.
  std::optional<int64_t> as_int() const;   // any integer type (uint64 > INT64_MAX: nullopt)
  std::optional<double> as_float() const;  // float32/float64 or any integer
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const GgufArray* as_array() const;
};

struct GgufTensorInfo {
  std::string name;
  TensorView view;      // data points into the map; shape outermost first
  uint64_t offset = 0;  // relative to the start of the data section
};

class GgufFile {
 public:
  // Maps and parses `path`. Throws InputError ("<path>: <problem>") on anything malformed.
  static GgufFile open(const std::string& path);
  // Parses bytes owned by the caller (tests, fuzzing); views point into `bytes`.
  static GgufFile parse(std::span<const uint8_t> bytes);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;

  // Convenience reads: nullopt when the key is absent; InputError when present with a
  // type that does not fit (e.g. a string where a number was expected).
  std::optional<int64_t> get_int(const std::string& key) const;
  std::optional<double> get_float(const std::string& key) const;
  std::optional<bool> get_bool(const std::string& key) const;
  std::optional<std::string> get_string(const std::string& key) const;
  // Arrays: InputError when the elements have the wrong type.
  std::optional<std::vector<std::string>> get_string_array(const std::string& key) const;
  std::optional<std::vector<float>> get_float_array(const std::string& key) const;
  std::optional<std::vector<int64_t>> get_int_array(const std::string& key) const;

  // The map backing the views (null for parse()); keep it alive as long as the views.
  std::shared_ptr<const MappedFile> mapping() const { return mapping_; }

 private:
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::shared_ptr<const MappedFile> mapping_;
};

}  // namespace tandem
