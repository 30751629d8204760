// Safetensors reader. Trusts nothing: the header length is checked against the file and a
// size cap before the JSON is parsed, every entry's dtype, shape and offsets are checked,
// and the tensors must tile the data section exactly (no overlap, no hole, nothing past the
// end), so a hostile file ends in one InputError line, never in a crash or a huge allocation.
#include "io/safetensors_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace tandem {
namespace {

using nlohmann::json;

// The reference implementation's cap; real headers are a few hundred KiB at most.
constexpr uint64_t kMaxHeaderBytes = uint64_t{100} << 20;

struct SafetensorsDType {
  const char* name;
  DType dtype;
};
// U8 as I8: see SafetensorsTensor::view.
constexpr SafetensorsDType kReadableDTypes[] = {
    {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"U8", DType::I8}};
// Valid safetensors dtypes Tandem does not read: named in the error instead of "unknown".
constexpr const char* kOtherDTypes[] = {"F64",  "I64",     "I32",     "I16", "I8",      "U64",     "U32",    "U16",
                                        "BOOL", "F8_E4M3", "F8_E5M2", "F4",  "F6_E2M3", "F6_E3M2", "F8_E8M0"};

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }

const SafetensorsDType& parse_dtype(const std::string& name, const std::string& tensor) {
  for (const SafetensorsDType& known : kReadableDTypes)
    if (name == known.name) return known;
  for (const char* other : kOtherDTypes)
    TANDEM_CHECK_INPUT(name != other, "tensor '{}' has dtype {}, which Tandem does not read (F32, F16, BF16, U8)",
                       tensor, name);
  throw InputError(fmt::format("tensor '{}' has unknown dtype '{}'", tensor, name.substr(0, 32)));
}

uint64_t unsigned_value(const json& value, const std::string& tensor, const char* field) {
  TANDEM_CHECK_INPUT(value.is_number_unsigned(), "tensor '{}': {} must hold non-negative integers", tensor, field);
  return value.get<uint64_t>();
}

SafetensorsTensor parse_entry(const std::string& name, const json& entry, std::span<const uint8_t> data) {
  TANDEM_CHECK_INPUT(entry.is_object(), "tensor '{}': header entry is not an object", name);
  for (const auto& [field, unused] : entry.items())
    TANDEM_CHECK_INPUT(field == "dtype" || field == "shape" || field == "data_offsets",
                       "tensor '{}': unexpected field '{}'", name, field.substr(0, 32));
  const auto dtype_it = entry.find("dtype");
  const auto shape_it = entry.find("shape");
  const auto offsets_it = entry.find("data_offsets");
  TANDEM_CHECK_INPUT(dtype_it != entry.end() && dtype_it->is_string(), "tensor '{}': missing string 'dtype'", name);
  TANDEM_CHECK_INPUT(shape_it != entry.end() && shape_it->is_array(), "tensor '{}': missing array 'shape'", name);
  TANDEM_CHECK_INPUT(offsets_it != entry.end() && offsets_it->is_array() && offsets_it->size() == 2,
                     "tensor '{}': 'data_offsets' must be [begin, end]", name);

  SafetensorsTensor tensor;
  tensor.name = name;
  const SafetensorsDType& dtype = parse_dtype(dtype_it->get<std::string>(), name);
  tensor.view.dtype = dtype.dtype;
  tensor.stored_dtype = dtype.name;
  TANDEM_CHECK_INPUT(shape_it->size() <= TensorView::kMaxDims, "tensor '{}' has {} dimensions (at most {})", name,
                     shape_it->size(), TensorView::kMaxDims);
  uint64_t n_elements = 1;
  for (const json& extent_json : *shape_it) {
    const uint64_t extent = unsigned_value(extent_json, name, "shape");
    TANDEM_CHECK_INPUT(extent > 0, "tensor '{}' has a dimension of size 0", name);
    TANDEM_CHECK_INPUT(checked_mul(n_elements, extent, &n_elements) && n_elements <= (uint64_t{1} << 48),
                       "tensor '{}' has too many elements", name);
    tensor.view.shape[tensor.view.n_dims++] = static_cast<int64_t>(extent);
  }
  tensor.begin = unsigned_value((*offsets_it)[0], name, "data_offsets");
  tensor.end = unsigned_value((*offsets_it)[1], name, "data_offsets");
  TANDEM_CHECK_INPUT(tensor.begin <= tensor.end && tensor.end <= data.size(),
                     "tensor '{}': data_offsets [{}, {}] lie outside the data section of {} bytes", name, tensor.begin,
                     tensor.end, data.size());
  const auto element_bytes = static_cast<uint64_t>(dtype_traits(tensor.view.dtype).block_bytes);
  const uint64_t expected = n_elements * element_bytes;  // n_elements <= 2^48: no overflow
  TANDEM_CHECK_INPUT(tensor.end - tensor.begin == expected,
                     "tensor '{}' of shape {} and dtype {} needs {} bytes, data_offsets give {}", name,
                     tensor.view.shape_string(), dtype_it->get<std::string>(), expected, tensor.end - tensor.begin);
  tensor.view.data = data.data() + tensor.begin;
  return tensor;
}

}  // namespace

SafetensorsFile SafetensorsFile::parse(std::span<const uint8_t> bytes) {
  TANDEM_CHECK_INPUT(bytes.size() >= 8, "file of {} bytes is too short for a safetensors header", bytes.size());
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | bytes[static_cast<size_t>(i)];
  TANDEM_CHECK_INPUT(header_length <= bytes.size() - 8,
                     "header length {} runs past the end of the file ({} bytes): not a safetensors file, or truncated",
                     header_length, bytes.size());
  TANDEM_CHECK_INPUT(header_length <= kMaxHeaderBytes, "header length {} is larger than the {} byte limit",
                     header_length, kMaxHeaderBytes);
  TANDEM_CHECK_INPUT(header_length >= 2 && bytes[8] == '{', "header is not a JSON object");
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  const json header = json::parse(header_begin, header_begin + header_length, nullptr, /*allow_exceptions=*/false);
  TANDEM_CHECK_INPUT(!header.is_discarded(), "header is not well-formed JSON");
  TANDEM_CHECK_INPUT(header.is_object(), "header is not a JSON object");
  const std::span<const uint8_t> data = bytes.subspan(8 + static_cast<size_t>(header_length));

  SafetensorsFile file;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      TANDEM_CHECK_INPUT(entry.is_object(), "'__metadata__' is not an object");
      for (const auto& [key, value] : entry.items()) {
        TANDEM_CHECK_INPUT(value.is_string(), "'__metadata__' value of '{}' is not a string", key.substr(0, 64));
        file.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    file.tensors_.push_back(parse_entry(name, entry, data));
  }

  // The tensors must tile the data section: sorted by offset, each starts where the previous
  // one ended (as the reference implementation requires), which rules out overlap and holes.
  std::sort(file.tensors_.begin(), file.tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected_begin = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const SafetensorsTensor& tensor : file.tensors_) {
    TANDEM_CHECK_INPUT(tensor.begin >= expected_begin, "tensors '{}' and '{}' overlap in the data section",
                       previous ? previous->name : std::string(), tensor.name);
    TANDEM_CHECK_INPUT(tensor.begin == expected_begin, "data section has a gap of {} bytes before tensor '{}'",
                       tensor.begin - expected_begin, tensor.name);
    expected_begin = tensor.end;
    previous = &tensor;
  }
  TANDEM_CHECK_INPUT(expected_begin == data.size(), "data section has {} bytes after the last tensor",
                     data.size() - expected_begin);
  for (size_t i = 0; i < file.tensors_.size(); ++i) file.index_[file.tensors_[i].name] = i;
  return file;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  auto mapping = std::make_shared<const MappedFile>(path);
  try {
    SafetensorsFile file = parse(mapping->bytes());
    file.mapping_ = std::move(mapping);
    return file;
  } catch (const InputError& error) {
    throw InputError(fmt::format("{}: {}", path, error.what()));
  }
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const std::string& dir) {
  namespace fs = std::filesystem;
  SafetensorsCheckpoint checkpoint;
  auto add_file = [&](const std::string& path) {
    checkpoint.files_.push_back(std::make_shared<SafetensorsFile>(SafetensorsFile::open(path)));
    checkpoint.paths_.push_back(path);
    return checkpoint.files_.size() - 1;
  };
  auto add_tensor = [&](size_t file, const SafetensorsTensor& tensor) {
    const auto [it, inserted] = checkpoint.tensors_.emplace(tensor.name, std::make_pair(file, &tensor));
    TANDEM_CHECK_INPUT(inserted, "tensor '{}' is in both '{}' and '{}'", tensor.name,
                       checkpoint.paths_[it->second.first], checkpoint.paths_[file]);
  };

  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  if (!fs::exists(index_path)) {
    TANDEM_CHECK_INPUT(fs::exists(single), "'{}' has neither model.safetensors nor model.safetensors.index.json", dir);
    const size_t file = add_file(single.string());
    for (const SafetensorsTensor& tensor : checkpoint.files_[file]->tensors()) add_tensor(file, tensor);
    return checkpoint;
  }

  std::ifstream index_stream(index_path);
  const json index = json::parse(index_stream, nullptr, /*allow_exceptions=*/false);
  TANDEM_CHECK_INPUT(!index.is_discarded() && index.is_object(), "{}: not a well-formed JSON object",
                     index_path.string());
  const auto weight_map = index.find("weight_map");
  TANDEM_CHECK_INPUT(weight_map != index.end() && weight_map->is_object() && !weight_map->empty(),
                     "{}: missing or empty 'weight_map'", index_path.string());
  std::map<std::string, size_t> shard_ids;
  for (const auto& [name, shard_json] : weight_map->items()) {
    TANDEM_CHECK_INPUT(shard_json.is_string(), "{}: shard of '{}' is not a string", index_path.string(), name);
    const std::string shard = shard_json.get<std::string>();
    // Shards live beside the index; a path elsewhere is a hostile or broken index.
    TANDEM_CHECK_INPUT(!shard.empty() && shard.find('/') == std::string::npos && shard != "." && shard != "..",
                       "{}: shard name '{}' is not a file name in the model folder", index_path.string(), shard);
    if (!shard_ids.contains(shard)) {
      const fs::path shard_path = fs::path(dir) / shard;
      TANDEM_CHECK_INPUT(fs::exists(shard_path), "missing shard '{}' (listed in {})", shard_path.string(),
                         index_path.string());
      shard_ids[shard] = add_file(shard_path.string());
    }
    const size_t file = shard_ids[shard];
    const SafetensorsTensor* tensor = checkpoint.files_[file]->find(name);
    TANDEM_CHECK_INPUT(tensor != nullptr, "tensor '{}' is not in shard '{}' as {} says", name, shard,
                       index_path.string());
    add_tensor(file, *tensor);
  }
  return checkpoint;
}

const SafetensorsTensor* SafetensorsCheckpoint::find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second.second;
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> names;
  for (const auto& [name, unused] : tensors_) names.push_back(name);
  return names;
}

std::vector<std::shared_ptr<const MappedFile>> SafetensorsCheckpoint::mappings() const {
  std::vector<std::shared_ptr<const MappedFile>> mappings;
  for (const auto& file : files_) mappings.push_back(file->mapping());
  return mappings;
}

const std::string& SafetensorsCheckpoint::file_of(const std::string& name) const {
  static const std::string kNone;
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? kNone : paths_[it->second.first];
}

std::shared_ptr<const MappedFile> SafetensorsCheckpoint::mapping_of(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : files_[it->second.first]->mapping();
}

}  // namespace tandem
