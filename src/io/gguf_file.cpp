// GGUF v2/v3 reader. It trusts nothing: every count, length, shape and offset is checked
// against the bytes that remain before anything is allocated or viewed, so a hostile file
// ends in one InputError line, never in a crash or a huge allocation. (Writer: gguf_writer.cpp.)
#include "io/gguf_file.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <set>

#include "base/error.h"

namespace tandem {
namespace {

constexpr uint64_t kDefaultAlignment = kGgufDefaultAlignment;
// Nested arrays recurse; a limit keeps a hostile file from exhausting the stack.
constexpr int kMaxArrayDepth = 8;
// Each parsed value costs ~50 bytes of memory however small its encoding, so the total is
// capped too; the largest real vocabularies hold under a million values.
constexpr uint64_t kMaxMetadataValues = uint64_t{1} << 22;
constexpr const char* kAlignmentKey = kGgufAlignmentKey;

std::string_view type_name(GgufValueType type) {
  constexpr std::string_view kNames[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                         "bool",  "string", "array",  "uint64", "int64",  "float64"};
  const auto index = static_cast<uint32_t>(type);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

// Bytes the smallest possible encoding of a value of `type` takes; 0 for an unknown type.
uint64_t min_encoded_size(uint32_t type) {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::UInt8:
    case GgufValueType::Int8:
    case GgufValueType::Bool: return 1;
    case GgufValueType::UInt16:
    case GgufValueType::Int16: return 2;
    case GgufValueType::UInt32:
    case GgufValueType::Int32:
    case GgufValueType::Float32: return 4;
    case GgufValueType::UInt64:
    case GgufValueType::Int64:
    case GgufValueType::Float64:
    case GgufValueType::String: return 8;     // the length; the bytes may be empty
    case GgufValueType::Array: return 4 + 8;  // element type and count
  }
  return 0;
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// Little-endian reads from a span, each checked against the bytes left.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  void need(uint64_t n, std::string_view what) const {
    TANDEM_CHECK_INPUT(n <= remaining(), "truncated file: {} needs {} bytes at offset {} but only {} remain", what, n,
                       pos_, remaining());
  }

  template <typename T>
  T read(std::string_view what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;  // GGUF is little-endian and so is every host Tandem runs on
  }

  std::string read_string(std::string_view what) {
    const uint64_t length = read<uint64_t>(what);
    TANDEM_CHECK_INPUT(length <= remaining(),
                       "{}: string length {} at offset {} runs past the end of the file ({} bytes "
                       "remain)",
                       what, length, pos_ - 8, remaining());
    std::string text(reinterpret_cast<const char*>(bytes_.data() + pos_), length);
    pos_ += length;
    return text;
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t pos_ = 0;
};

// `n_values` counts the values read so far in the whole file.
GgufValue read_value(Cursor& cursor, uint32_t type_id, const std::string& key, int depth, uint64_t& n_values) {
  TANDEM_CHECK_INPUT(min_encoded_size(type_id) != 0, "metadata key '{}' has unknown value type {}", key, type_id);
  TANDEM_CHECK_INPUT(++n_values <= kMaxMetadataValues, "metadata holds more than {} values (at key '{}')",
                     kMaxMetadataValues, key);
  GgufValue value;
  value.type = static_cast<GgufValueType>(type_id);
  switch (value.type) {
    case GgufValueType::UInt8: value.data = uint64_t{cursor.read<uint8_t>(key)}; break;
    case GgufValueType::Int8: value.data = int64_t{cursor.read<int8_t>(key)}; break;
    case GgufValueType::UInt16: value.data = uint64_t{cursor.read<uint16_t>(key)}; break;
    case GgufValueType::Int16: value.data = int64_t{cursor.read<int16_t>(key)}; break;
    case GgufValueType::UInt32: value.data = uint64_t{cursor.read<uint32_t>(key)}; break;
    case GgufValueType::Int32: value.data = int64_t{cursor.read<int32_t>(key)}; break;
    case GgufValueType::UInt64: value.data = cursor.read<uint64_t>(key); break;
    case GgufValueType::Int64: value.data = cursor.read<int64_t>(key); break;
    case GgufValueType::Float32: value.data = double{cursor.read<float>(key)}; break;
    case GgufValueType::Float64: value.data = cursor.read<double>(key); break;
    case GgufValueType::Bool: {
      const uint8_t byte = cursor.read<uint8_t>(key);
      TANDEM_CHECK_INPUT(byte <= 1, "metadata key '{}' has invalid bool byte {}", key, byte);
      value.data = byte == 1;
      break;
    }
    case GgufValueType::String: value.data = cursor.read_string(key); break;
    case GgufValueType::Array: {
      TANDEM_CHECK_INPUT(depth < kMaxArrayDepth, "metadata key '{}': arrays nested deeper than {}", key,
                         kMaxArrayDepth);
      const uint32_t element_type = cursor.read<uint32_t>(key);
      const uint64_t element_size = min_encoded_size(element_type);
      TANDEM_CHECK_INPUT(element_size != 0, "metadata key '{}' has unknown array element type {}", key, element_type);
      const uint64_t count = cursor.read<uint64_t>(key);
      // Cap the count by what the remaining bytes could possibly hold before reserving.
      TANDEM_CHECK_INPUT(count <= cursor.remaining() / element_size,
                         "metadata key '{}': array of {} {} elements cannot fit in the {} bytes "
                         "left in the file",
                         key, count, type_name(static_cast<GgufValueType>(element_type)), cursor.remaining());
      value.array_type = static_cast<GgufValueType>(element_type);
      GgufArray elements;
      elements.reserve(count);
      for (uint64_t i = 0; i < count; ++i)
        elements.push_back(read_value(cursor, element_type, key, depth + 1, n_values));
      value.data = std::move(elements);
      break;
    }
  }
  return value;
}

uint64_t align_up(uint64_t offset, uint64_t alignment) { return (offset + alignment - 1) / alignment * alignment; }

// Reads general.alignment when present: an integer that is a nonzero power of two.
uint64_t read_alignment(const std::map<std::string, GgufValue>& metadata) {
  auto it = metadata.find(kAlignmentKey);
  if (it == metadata.end()) return kDefaultAlignment;
  const auto value = it->second.as_int();
  TANDEM_CHECK_INPUT(value.has_value() && it->second.type != GgufValueType::Bool, "{} must be an integer, not {}",
                     kAlignmentKey, type_name(it->second.type));
  TANDEM_CHECK_INPUT(*value > 0 && std::has_single_bit(static_cast<uint64_t>(*value)) && *value <= (int64_t{1} << 30),
                     "{} is {}, but must be a power of two between 1 and 2^30", kAlignmentKey, *value);
  return static_cast<uint64_t>(*value);
}

GgufTensorInfo read_tensor_info(Cursor& cursor, uint64_t index) {
  GgufTensorInfo info;
  info.name = cursor.read_string(fmt::format("tensor {} name", index));
  const std::string& name = info.name;
  const uint32_t n_dims = cursor.read<uint32_t>(name);
  TANDEM_CHECK_INPUT(n_dims >= 1 && n_dims <= TensorView::kMaxDims, "tensor '{}' has {} dimensions (must be 1 to {})",
                     name, n_dims, TensorView::kMaxDims);
  uint64_t dims[TensorView::kMaxDims] = {};  // GGUF order: dims[0] is innermost
  uint64_t n_elements = 1;
  for (uint32_t i = 0; i < n_dims; ++i) {
    dims[i] = cursor.read<uint64_t>(name);
    TANDEM_CHECK_INPUT(dims[i] > 0, "tensor '{}' has dimension {} of size 0", name, i);
    TANDEM_CHECK_INPUT(checked_mul(n_elements, dims[i], &n_elements) && n_elements <= static_cast<uint64_t>(INT64_MAX),
                       "tensor '{}' has an element count that overflows 64 bits", name);
  }
  const uint32_t type_id = cursor.read<uint32_t>(name);
  const auto traits = dtype_traits(type_id);
  TANDEM_CHECK_INPUT(traits.has_value(), "unsupported tensor type id {} for '{}'", type_id, name);
  TANDEM_CHECK_INPUT(dims[0] % static_cast<uint64_t>(traits->block_size) == 0,
                     "tensor '{}' of type {} has rows of {} elements, not a multiple of its block "
                     "size {}",
                     name, traits->name, dims[0], traits->block_size);
  info.offset = cursor.read<uint64_t>(name);

  info.view.dtype = static_cast<DType>(type_id);
  info.view.n_dims = static_cast<int>(n_dims);
  for (uint32_t i = 0; i < n_dims; ++i) info.view.shape[n_dims - 1 - i] = static_cast<int64_t>(dims[i]);
  return info;
}

}  // namespace

// ---- GgufValue ----

std::optional<int64_t> GgufValue::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&data)) return *i;
  return std::nullopt;
}

std::optional<double> GgufValue::as_float() const {
  if (const auto* d = std::get_if<double>(&data)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data)) return *b;
  return std::nullopt;
}

const std::string* GgufValue::as_string() const { return std::get_if<std::string>(&data); }
const GgufArray* GgufValue::as_array() const { return std::get_if<GgufArray>(&data); }

// ---- GgufFile ----

GgufFile GgufFile::open(const std::string& path) {
  auto mapping = std::make_shared<const MappedFile>(path);
  try {
    GgufFile file = parse(mapping->bytes());
    file.mapping_ = std::move(mapping);
    return file;
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: {}", path, error.what()));
  }
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes) {
  Cursor cursor(bytes);
  GgufFile file;
  TANDEM_CHECK_INPUT(bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0,
                     "not a GGUF file (the first 4 bytes are not \"GGUF\")");
  cursor.read<uint32_t>("magic");
  const uint32_t version = cursor.read<uint32_t>("version");
  // A big-endian file shows its small version number byte-swapped.
  const uint32_t swapped = __builtin_bswap32(version);
  TANDEM_CHECK_INPUT(!(swapped >= 1 && swapped <= 3),
                     "big-endian GGUF files are not supported (version {} byte-swapped)", swapped);
  TANDEM_CHECK_INPUT(version != 1, "GGUF version 1 is not supported (only v2 and v3); re-convert the model "
                                   "with a current converter");
  TANDEM_CHECK_INPUT(version == 2 || version == 3, "unsupported GGUF version {} (Tandem reads versions 2 and 3)",
                     version);
  file.version_ = version;

  const uint64_t tensor_count = cursor.read<uint64_t>("tensor count");
  const uint64_t kv_count = cursor.read<uint64_t>("metadata count");
  // The smallest key/value is a length, a type and a one-byte value; the smallest tensor
  // info is a length, n_dims, one dimension, a type and an offset.
  TANDEM_CHECK_INPUT(kv_count <= cursor.remaining() / (8 + 4 + 1),
                     "metadata count {} is impossible for a file of {} bytes", kv_count, bytes.size());
  TANDEM_CHECK_INPUT(tensor_count <= cursor.remaining() / (8 + 4 + 8 + 4 + 8),
                     "tensor count {} is impossible for a file of {} bytes", tensor_count, bytes.size());

  uint64_t n_values = 0;
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = cursor.read_string(fmt::format("metadata key {}", i));
    const uint32_t type_id = cursor.read<uint32_t>(key);
    GgufValue value = read_value(cursor, type_id, key, 0, n_values);
    TANDEM_CHECK_INPUT(!file.metadata_.contains(key), "duplicate metadata key '{}'", key);
    file.metadata_.emplace(std::move(key), std::move(value));
  }
  file.alignment_ = read_alignment(file.metadata_);

  std::set<std::string> names;
  file.tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo info = read_tensor_info(cursor, i);
    TANDEM_CHECK_INPUT(names.insert(info.name).second, "duplicate tensor name '{}'", info.name);
    file.tensors_.push_back(std::move(info));
  }

  // The data section starts at the aligned end of the tensor infos. A file without tensors
  // may stop before that padding.
  file.data_offset_ = align_up(cursor.pos(), file.alignment_);
  for (GgufTensorInfo& info : file.tensors_) {
    TANDEM_CHECK_INPUT(info.offset % file.alignment_ == 0,
                       "tensor '{}' has offset {}, not a multiple of the alignment {}", info.name, info.offset,
                       file.alignment_);
    // n_elements cannot overflow (checked above), but bytes might for wide block types.
    const DTypeTraits traits = dtype_traits(info.view.dtype);
    const uint64_t n_blocks = static_cast<uint64_t>(info.view.n_elements() / traits.block_size);
    uint64_t n_bytes = 0, start = 0, end = 0;
    const bool fits = checked_mul(n_blocks, traits.block_bytes, &n_bytes) &&
                      checked_add(file.data_offset_, info.offset, &start) && checked_add(start, n_bytes, &end) &&
                      end <= bytes.size();
    TANDEM_CHECK_INPUT(fits,
                       "tensor '{}' ({} {}) at data offset {} runs past the end of the file "
                       "({} bytes)",
                       info.name, traits.name, info.view.shape_string(), info.offset, bytes.size());
    info.view.data = bytes.data() + start;
  }
  return file;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const GgufTensorInfo& info : tensors_)
    if (info.name == name) return &info;
  return nullptr;
}

namespace {

[[noreturn]] void wrong_type(const std::string& key, const GgufValue& value, std::string_view want) {
  throw InputError(fmt::format("metadata key '{}' is a {}, expected {}", key, type_name(value.type), want));
}

const GgufArray* array_of(const GgufValue* value, const std::string& key, std::string_view want) {
  const GgufArray* elements = value->as_array();
  if (elements == nullptr) wrong_type(key, *value, want);
  return elements;
}

}  // namespace

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  auto result = value->as_int();
  if (!result) wrong_type(key, *value, "an integer");
  return result;
}

std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  auto result = value->as_float();
  if (!result) wrong_type(key, *value, "a number");
  return result;
}

std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  auto result = value->as_bool();
  if (!result) wrong_type(key, *value, "a bool");
  return result;
}

std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  const std::string* result = value->as_string();
  if (result == nullptr) wrong_type(key, *value, "a string");
  return *result;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  std::vector<std::string> result;
  for (const GgufValue& element : *array_of(value, key, "an array of strings")) {
    const std::string* text = element.as_string();
    TANDEM_CHECK_INPUT(text != nullptr, "metadata key '{}' holds {} elements, expected strings", key,
                       type_name(element.type));
    result.push_back(*text);
  }
  return result;
}

std::optional<std::vector<float>> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  std::vector<float> result;
  for (const GgufValue& element : *array_of(value, key, "an array of numbers")) {
    auto number = element.as_float();
    TANDEM_CHECK_INPUT(number.has_value(), "metadata key '{}' holds {} elements, expected numbers", key,
                       type_name(element.type));
    result.push_back(static_cast<float>(*number));
  }
  return result;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue* value = find(key);
  if (value == nullptr) return std::nullopt;
  std::vector<int64_t> result;
  for (const GgufValue& element : *array_of(value, key, "an array of integers")) {
    auto number = element.as_int();
    TANDEM_CHECK_INPUT(number.has_value(), "metadata key '{}' holds {} elements, expected integers", key,
                       type_name(element.type));
    result.push_back(*number);
  }
  return result;
}

}  // namespace tandem
