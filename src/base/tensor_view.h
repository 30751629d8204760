// TensorView: a non-owning view of a tensor (pointer, element type, shape). Storage lives
// elsewhere (an mmap'd file, an aligned buffer); copying a view never copies data.
// Shapes are written outermost first: a weight matrix is [n_rows, n_cols] with rows
// contiguous, as GGUF stores it (GGUF's ne[0] is our last dimension).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "base/error.h"

namespace tandem {

struct TensorView {
  static constexpr int kMaxDims = 4;

  const void* data = nullptr;
  DType dtype = DType::F32;
  int n_dims = 0;
  std::array<int64_t, kMaxDims> shape{};  // outermost first
  // Optional copy of the same matrix rearranged for the active kernels (e.g. AMX tiles);
  // owned by the Model's storage. Kernels that know the layout use it, others ignore it.
  const uint8_t* packed = nullptr;

  int64_t dim(int i) const { return shape[i]; }
  int64_t n_elements() const {
    int64_t n = 1;
    for (int i = 0; i < n_dims; ++i) n *= shape[i];
    return n;
  }
  // Elements in one row (the innermost dimension).
  int64_t row_length() const { return n_dims == 0 ? 1 : shape[n_dims - 1]; }
  int64_t n_rows() const { return n_elements() / row_length(); }
  int64_t row_bytes() const { return dtype_row_bytes(dtype, row_length()); }
  int64_t n_bytes() const { return n_rows() * row_bytes(); }
  const uint8_t* row(int64_t i) const { return static_cast<const uint8_t*>(data) + i * row_bytes(); }
  // Rows [first, first + count) of a matrix, in place (a fused tensor's parts).
  TensorView rows(int64_t first, int64_t count) const {
    TANDEM_ASSERT(n_dims == 2 && packed == nullptr && first >= 0 && count >= 0 && first + count <= shape[0]);
    TensorView part = *this;
    part.data = row(first);
    part.shape[0] = count;
    return part;
  }
  const float* f32() const {
    TANDEM_ASSERT(dtype == DType::F32);
    return static_cast<const float*>(data);
  }
  std::string shape_string() const {
    std::string text = "[";
    for (int i = 0; i < n_dims; ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
    return text + "]";
  }
};

inline TensorView make_view(const void* data, DType dtype, std::initializer_list<int64_t> shape) {
  TensorView view;
  view.data = data;
  view.dtype = dtype;
  TANDEM_ASSERT(shape.size() <= TensorView::kMaxDims);
  for (int64_t extent : shape) view.shape[view.n_dims++] = extent;
  return view;
}

}  // namespace tandem
