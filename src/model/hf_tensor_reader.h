// HfTensorReader: a Hugging Face checkpoint's tensors as a model needs them: looked up by name
// and checked against the shape config.json implies (one-line InputErrors naming the tensor),
// read as numbers only when stored as F32/F16/BF16 (U8 is bytes), realigned when the file leaves
// them unaligned, norms and biases converted to f32; every buffer it makes is kept alive by the
// Model. No model family's tensor names or layouts live here (hf_model_loader and its helpers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/tensor_view.h"
#include "io/safetensors_file.h"
#include "model/model.h"

namespace tandem {

class HfTensorReader {
 public:
  HfTensorReader(const SafetensorsCheckpoint& checkpoint, Model& model) : checkpoint_(checkpoint), model_(model) {}

  const SafetensorsCheckpoint& checkpoint() const { return checkpoint_; }
  bool has(const std::string& name) const { return checkpoint_.find(name) != nullptr; }
  // Any stored type; "missing tensor" otherwise.
  const SafetensorsTensor& tensor(const std::string& name) const;
  // A tensor read as numbers: F32, F16 or BF16 (U8, MXFP4's bytes, is an error naming it).
  const SafetensorsTensor& float_tensor(const std::string& name) const;

  // [rows, cols] in the stored float type: a view into the map, or an aligned copy.
  TensorView matrix(const std::string& name, int64_t rows, int64_t cols);
  // [length] as f32 (what the kernels read norms and biases as), `offset` added to each element.
  TensorView vector(const std::string& name, int64_t length, float offset = 0.0f);
  // A float tensor of exactly `shape`, as stored (maybe unaligned: for element-wise copies).
  TensorView stacked(const std::string& name, const std::vector<int64_t>& shape) const;
  // Keeps `bytes` alive with the model and returns them as [rows, cols] (cols 0: [rows]).
  TensorView own(std::vector<uint8_t> bytes, DType dtype, int64_t rows, int64_t cols);

  // A one-line error naming the tensor and both shapes unless `view` is exactly `shape`.
  static void expect_shape(const TensorView& view, const std::string& name, const std::vector<int64_t>& shape);

 private:
  const SafetensorsCheckpoint& checkpoint_;
  Model& model_;
};

}  // namespace tandem
