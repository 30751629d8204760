// Tensor-parallel slices (see tensor_slice.h): the split's checks, a rank's heads and columns,
// and the cut of a model's views to them.
#include "model/tensor_slice.h"

#include <cstring>

#include "base/error.h"
#include "io/mapped_file.h"

namespace tandem {

namespace {

// Elements [first, first + count) of a 1-D f32 vector (a bias, the sinks), in place; null stays null.
TensorView slice_vector(const TensorView& vector, int64_t first, int64_t count) {
  if (vector.data == nullptr) return vector;
  TANDEM_ASSERT(vector.n_dims == 1 && vector.dtype == DType::F32 && first + count <= vector.shape[0]);
  TensorView part = vector;
  part.data = vector.f32() + first;
  part.shape[0] = count;
  return part;
}

}  // namespace

TensorSliceShape tensor_slice_shape(const ModelConfig& c, const TensorSlice& slice) {
  const int64_t t = slice.size;
  TANDEM_ASSERT(slice.rank >= 0 && slice.rank < t);
  TANDEM_CHECK_INPUT(!c.has_experts(),
                     "--tensor-parallel {}: a mixture-of-experts model ({} experts) is not split over ranks; serve it "
                     "in one process or with --pipeline",
                     t, c.n_experts);
  TANDEM_CHECK_INPUT(c.n_heads % t == 0,
                     "--tensor-parallel {}: the model's {} query heads do not split into {} equal parts", t, c.n_heads,
                     t);
  TANDEM_CHECK_INPUT(c.n_kv_heads % t == 0 || t % c.n_kv_heads == 0,
                     "--tensor-parallel {}: the model's {} KV heads neither split into {} equal parts nor divide {} "
                     "(each rank must hold whole GQA groups)",
                     t, c.n_kv_heads, t, t);
  TANDEM_CHECK_INPUT(c.d_ff % t == 0,
                     "--tensor-parallel {}: the model's FFN width {} does not split into {} equal parts", t, c.d_ff, t);
  TensorSliceShape shape;
  shape.n_q_heads = c.n_heads / t;
  shape.q_head_first = slice.rank * shape.n_q_heads;
  if (c.n_kv_heads >= t) {
    shape.n_kv_heads = c.n_kv_heads / t;
    shape.kv_head_first = slice.rank * shape.n_kv_heads;
  } else {
    // Fewer KV heads than ranks: T / n_kv_heads ranks share each, every one holding a copy.
    shape.n_kv_heads = 1;
    shape.kv_head_first = shape.q_head_first / (c.n_heads / c.n_kv_heads);
  }
  shape.d_ff = c.d_ff / t;
  shape.ffn_first = slice.rank * shape.d_ff;
  return shape;
}

ModelConfig tensor_slice_config(const ModelConfig& whole, const TensorSlice& slice) {
  const TensorSliceShape shape = tensor_slice_shape(whole, slice);
  ModelConfig config = whole;
  config.n_heads = shape.n_q_heads;
  config.n_kv_heads = shape.n_kv_heads;
  config.d_ff = shape.d_ff;
  return config;
}

TensorView copy_columns(const TensorView& matrix, int64_t first, int64_t count, const char* name,
                        std::vector<uint8_t>& storage) {
  TANDEM_ASSERT(matrix.n_dims == 2 && matrix.packed == nullptr && first >= 0 && count > 0 &&
                first + count <= matrix.shape[1]);
  const int64_t block = dtype_block_geometry(matrix.dtype).first;
  TANDEM_CHECK_INPUT(first % block == 0 && count % block == 0,
                     "--tensor-parallel: {} ({}, {}) would be cut at column {} of {}, inside a block of {} elements; "
                     "choose a --tensor-parallel that splits it into whole blocks",
                     name, dtype_name(matrix.dtype), matrix.shape_string(), first % block != 0 ? first : first + count,
                     matrix.shape[1], block);
  const int64_t row_bytes = dtype_row_bytes(matrix.dtype, count);
  const int64_t offset = dtype_row_bytes(matrix.dtype, first);
  storage.resize(static_cast<size_t>(matrix.shape[0] * row_bytes));
  for (int64_t r = 0; r < matrix.shape[0]; ++r)
    std::memcpy(storage.data() + r * row_bytes, matrix.row(r) + offset, static_cast<size_t>(row_bytes));
  TensorView part = matrix;
  part.data = storage.data();
  part.shape[1] = count;
  return part;
}

void keep_tensor_slice(Model& model, const TensorSlice& slice, const MappedFile* mapping) {
  TANDEM_ASSERT(model.packed_bytes == 0 && !model.tensor_slice.has_value());
  const ModelConfig& whole = model.config;
  const TensorSliceShape shape = tensor_slice_shape(whole, slice);
  const int64_t head_dim = whole.head_dim;
  auto copy_out = [&](TensorView& matrix, int64_t first, int64_t count, const char* name) {
    auto storage = std::make_shared<std::vector<uint8_t>>();
    const TensorView original = matrix;
    matrix = copy_columns(original, first, count, name, *storage);
    model.storage.push_back(storage);
    // The whole matrix was read to copy a part of each row: its file pages are not needed again.
    if (mapping != nullptr) mapping->release_pages(original.data, static_cast<size_t>(original.n_bytes()));
  };
  for (LayerWeights& layer : model.weights.layers) {
    if (layer.wq.data == nullptr) continue;  // a layer a pipeline stage does not hold
    layer.wq = layer.wq.rows(shape.q_head_first * head_dim, shape.n_q_heads * head_dim);
    layer.wk = layer.wk.rows(shape.kv_head_first * head_dim, shape.n_kv_heads * head_dim);
    layer.wv = layer.wv.rows(shape.kv_head_first * head_dim, shape.n_kv_heads * head_dim);
    layer.bq = slice_vector(layer.bq, shape.q_head_first * head_dim, shape.n_q_heads * head_dim);
    layer.bk = slice_vector(layer.bk, shape.kv_head_first * head_dim, shape.n_kv_heads * head_dim);
    layer.bv = slice_vector(layer.bv, shape.kv_head_first * head_dim, shape.n_kv_heads * head_dim);
    layer.sinks = slice_vector(layer.sinks, shape.q_head_first, shape.n_q_heads);
    copy_out(layer.wo, shape.q_head_first * head_dim, shape.n_q_heads * head_dim, "the attention output (attn_output)");
    layer.w_gate = layer.w_gate.rows(shape.ffn_first, shape.d_ff);
    layer.w_up = layer.w_up.rows(shape.ffn_first, shape.d_ff);
    copy_out(layer.w_down, shape.ffn_first, shape.d_ff, "the FFN's down projection (ffn_down)");
  }
  // Only rank 0 turns hidden states into logits; a tied head is the embedding, which stays.
  if (slice.rank != 0) {
    model.weights.output = TensorView{};
    model.weights.output_norm = TensorView{};
  }
  model.config = tensor_slice_config(whole, slice);
  model.tensor_slice = slice;
}

}  // namespace tandem
