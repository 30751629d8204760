// HfTensorReader. Safetensors does not align tensor data, and the kernels read whole elements,
// so matrices at an unaligned offset are copied; vectors are always converted into a new f32
// buffer (a few KiB each), reading their source through a byte copy.
#include "model/hf_tensor_reader.h"

#include <cstring>
#include <memory>

#include "base/error.h"
#include "base/quant.h"

namespace tandem {

const SafetensorsTensor& HfTensorReader::tensor(const std::string& name) const {
  const SafetensorsTensor* found = checkpoint_.find(name);
  TANDEM_CHECK_INPUT(found != nullptr, "missing tensor '{}'", name);
  return *found;
}

const SafetensorsTensor& HfTensorReader::float_tensor(const std::string& name) const {
  const SafetensorsTensor& found = tensor(name);
  TANDEM_CHECK_INPUT(found.is_float(), "tensor '{}' has dtype {}, expected F32, F16 or BF16", name, found.stored_dtype);
  return found;
}

TensorView HfTensorReader::own(std::vector<uint8_t> bytes, DType dtype, int64_t rows, int64_t cols) {
  auto buffer = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  model_.storage.push_back(buffer);
  return cols > 0 ? make_view(buffer->data(), dtype, {rows, cols}) : make_view(buffer->data(), dtype, {rows});
}

TensorView HfTensorReader::matrix(const std::string& name, int64_t rows, int64_t cols) {
  const TensorView& view = float_tensor(name).view;
  TANDEM_CHECK_INPUT(view.n_dims == 2 && view.dim(0) == rows && view.dim(1) == cols,
                     "tensor '{}' has shape {}, but config.json implies [{}, {}]", name, view.shape_string(), rows,
                     cols);
  const auto element_bytes = static_cast<uintptr_t>(dtype_traits(view.dtype).block_bytes);
  if (reinterpret_cast<uintptr_t>(view.data) % element_bytes == 0) return view;
  const auto* bytes = static_cast<const uint8_t*>(view.data);
  return own(std::vector<uint8_t>(bytes, bytes + view.n_bytes()), view.dtype, rows, cols);
}

TensorView HfTensorReader::vector(const std::string& name, int64_t length, float offset) {
  const TensorView& view = float_tensor(name).view;
  TANDEM_CHECK_INPUT(view.n_dims == 1 && view.dim(0) == length,
                     "tensor '{}' has shape {}, but config.json implies [{}]", name, view.shape_string(), length);
  std::vector<float> values(static_cast<size_t>(length));
  if (view.dtype == DType::F32) {
    std::memcpy(values.data(), view.data, values.size() * sizeof(float));
  } else {
    std::vector<uint8_t> aligned(static_cast<const uint8_t*>(view.data),
                                 static_cast<const uint8_t*>(view.data) + view.n_bytes());
    dequantize_row(view.dtype, aligned.data(), values.data(), length);
  }
  for (float& value : values) value += offset;
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return own(std::move(bytes), DType::F32, length, 0);
}

TensorView HfTensorReader::stacked(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorView& view = float_tensor(name).view;
  expect_shape(view, name, shape);
  return view;
}

void HfTensorReader::expect_shape(const TensorView& view, const std::string& name, const std::vector<int64_t>& shape) {
  bool same = view.n_dims == static_cast<int>(shape.size());
  for (size_t i = 0; same && i < shape.size(); ++i) same = view.dim(static_cast<int>(i)) == shape[i];
  std::string expected;
  for (int64_t dim : shape) expected += (expected.empty() ? "" : ", ") + std::to_string(dim);
  TANDEM_CHECK_INPUT(same, "tensor '{}' has shape {}, but config.json implies [{}]", name, view.shape_string(),
                     expected);
}

}  // namespace tandem
