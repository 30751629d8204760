// GGUF v3 writer (see gguf_writer.h): the header is encoded into memory, tensor data is
// streamed from each tensor's source, one tensor at a time, into a temp file then renamed.
#include "io/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/error.h"

namespace tandem {
namespace {

uint64_t align_up(uint64_t offset, uint64_t alignment) { return (offset + alignment - 1) / alignment * alignment; }

}  // namespace

namespace {

// Appends little-endian encodings to a byte buffer (the header; tensor data goes elsewhere).
class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}

  template <typename T>
  void put(T value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_string(const std::string& text) {
    put<uint64_t>(text.size());
    out_.insert(out_.end(), text.begin(), text.end());
  }

  // Writes the body of `value` as `type` (the type tag itself is written by the caller).
  void put_value(GgufValueType type, const GgufValue& value) {
    TANDEM_ASSERT(value.type == type);
    auto integer = [&]() -> uint64_t {
      if (const auto* u = std::get_if<uint64_t>(&value.data)) return *u;
      if (const auto* i = std::get_if<int64_t>(&value.data)) return static_cast<uint64_t>(*i);
      if (const auto* b = std::get_if<bool>(&value.data)) return *b ? 1 : 0;
      TANDEM_ASSERT(false && "GgufWriter: integer metadata holds a non-integer");
      return 0;
    };
    auto real = [&] {
      auto number = value.as_float();
      TANDEM_ASSERT(number.has_value());
      return *number;
    };
    switch (type) {
      case GgufValueType::UInt8:
      case GgufValueType::Int8:
      case GgufValueType::Bool: put(static_cast<uint8_t>(integer())); break;
      case GgufValueType::UInt16:
      case GgufValueType::Int16: put(static_cast<uint16_t>(integer())); break;
      case GgufValueType::UInt32:
      case GgufValueType::Int32: put(static_cast<uint32_t>(integer())); break;
      case GgufValueType::UInt64:
      case GgufValueType::Int64: put(integer()); break;
      case GgufValueType::Float32: put(static_cast<float>(real())); break;
      case GgufValueType::Float64: put(real()); break;
      case GgufValueType::String: {
        const std::string* text = value.as_string();
        TANDEM_ASSERT(text != nullptr);
        put_string(*text);
        break;
      }
      case GgufValueType::Array: {
        const GgufArray* elements = value.as_array();
        TANDEM_ASSERT(elements != nullptr);
        put(static_cast<uint32_t>(value.array_type));
        put<uint64_t>(elements->size());
        for (const GgufValue& element : *elements) put_value(value.array_type, element);
        break;
      }
    }
  }

 private:
  std::vector<uint8_t>& out_;
};

void write_all(std::FILE* out, const void* data, size_t n, const std::string& path) {
  TANDEM_CHECK_INPUT(n == 0 || std::fwrite(data, 1, n, out) == n, "cannot write '{}'", path);
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [existing, old] : metadata_) {
    if (existing == key) {
      old = std::move(value);  // keep the original position
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  const int64_t n_bytes = tensor_bytes(dtype, shape);
  TANDEM_ASSERT(static_cast<int64_t>(bytes.size()) == n_bytes);
  add_tensor(name, dtype, std::move(shape),
             [data = std::move(bytes)](std::span<uint8_t> out) { std::memcpy(out.data(), data.data(), data.size()); });
}

void GgufWriter::add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, TensorSource source) {
  for (const PendingTensor& tensor : tensors_) TANDEM_ASSERT(tensor.name != name);
  tensor_bytes(dtype, shape);  // asserts the shape is valid for the type
  tensors_.push_back({name, dtype, std::move(shape), std::move(source)});
}

int64_t GgufWriter::tensor_bytes(DType dtype, const std::vector<int64_t>& shape) {
  TANDEM_ASSERT(!shape.empty() && shape.size() <= TensorView::kMaxDims);
  int64_t n_rows = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) {
    TANDEM_ASSERT(shape[i] > 0);
    n_rows *= shape[i];
  }
  TANDEM_ASSERT(shape.back() > 0);
  return n_rows * dtype_row_bytes(dtype, shape.back());
}

uint64_t GgufWriter::alignment() const {
  for (const auto& [key, value] : metadata_) {
    if (key != kGgufAlignmentKey) continue;
    auto alignment = value.as_int();
    TANDEM_ASSERT(alignment && *alignment > 0 && std::has_single_bit(static_cast<uint64_t>(*alignment)));
    return static_cast<uint64_t>(*alignment);
  }
  return kGgufDefaultAlignment;
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
  std::vector<uint8_t> out;
  Encoder encoder(out);
  const uint64_t alignment = this->alignment();
  out.insert(out.end(), {'G', 'G', 'U', 'F'});
  encoder.put<uint32_t>(3);
  encoder.put<uint64_t>(tensors_.size());
  encoder.put<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    encoder.put_string(key);
    encoder.put(static_cast<uint32_t>(value.type));
    encoder.put_value(value.type, value);
  }
  uint64_t offset = 0;
  for (const PendingTensor& tensor : tensors_) {
    encoder.put_string(tensor.name);
    encoder.put<uint32_t>(static_cast<uint32_t>(tensor.shape.size()));
    for (auto it = tensor.shape.rbegin(); it != tensor.shape.rend(); ++it)  // innermost first
      encoder.put<uint64_t>(static_cast<uint64_t>(*it));
    encoder.put(static_cast<uint32_t>(tensor.dtype));
    encoder.put<uint64_t>(offset);
    offset = align_up(offset + static_cast<uint64_t>(tensor_bytes(tensor.dtype, tensor.shape)), alignment);
  }
  out.resize(align_up(out.size(), alignment), 0);
  return out;
}

void GgufWriter::emit(const std::function<void(std::span<const uint8_t>)>& sink) const {
  sink(header_bytes());
  const uint64_t alignment = this->alignment();
  std::vector<uint8_t> buffer;
  const std::vector<uint8_t> zeros(alignment, 0);
  for (const PendingTensor& tensor : tensors_) {
    const auto n_bytes = static_cast<uint64_t>(tensor_bytes(tensor.dtype, tensor.shape));
    buffer.assign(n_bytes, 0);
    tensor.source(buffer);
    sink(buffer);
    sink(std::span(zeros).first(align_up(n_bytes, alignment) - n_bytes));
  }
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out;
  emit([&](std::span<const uint8_t> chunk) { out.insert(out.end(), chunk.begin(), chunk.end()); });
  return out;
}

void GgufWriter::write(const std::string& path) const {
  const std::string temp_path = path + ".tmp";
  std::FILE* out = std::fopen(temp_path.c_str(), "wb");
  TANDEM_CHECK_INPUT(out != nullptr, "cannot create '{}': {}", temp_path, std::strerror(errno));
  try {
    emit([&](std::span<const uint8_t> chunk) { write_all(out, chunk.data(), chunk.size(), temp_path); });
    TANDEM_CHECK_INPUT(std::fclose(out) == 0, "cannot write '{}': {}", temp_path, std::strerror(errno));
    out = nullptr;
    TANDEM_CHECK_INPUT(std::rename(temp_path.c_str(), path.c_str()) == 0, "cannot rename '{}' to '{}': {}", temp_path,
                       path, std::strerror(errno));
  } catch (...) {
    if (out != nullptr) std::fclose(out);
    std::remove(temp_path.c_str());
    throw;
  }
}

}  // namespace tandem
