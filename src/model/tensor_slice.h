// Tensor-parallel slices (issue 36's --tensor-parallel T): what rank r of T holds of every
// layer, and the cut of a freshly built model's views down to it. No MPI here.
//
// Rank r holds query heads [r n_heads/T, (r+1) n_heads/T) with the KV heads their GQA groups
// read (KV heads split in T when there are at least T of them, else each rank holds the one
// its queries share: replicated), and FFN columns [r d_ff/T, (r+1) d_ff/T). Column-parallel
// matrices (Wq, Wk, Wv, gate, up) keep their rows of those heads/columns (a view in place);
// row-parallel ones (Wo, down) keep their columns of them (copied out: a row's slice is not
// contiguous), so their products are partial sums that the ranks add up (Forward). Norms, the
// output projection's bias, the embedding and the final norm are whole on every rank; the
// output head only on rank 0, which alone computes logits.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"

namespace tandem {

class MappedFile;  // io/mapped_file.h

// Rank `slice.rank`'s heads and FFN columns.
struct TensorSliceShape {
  int64_t q_head_first = 0, n_q_heads = 0;    // query heads [first, first + n)
  int64_t kv_head_first = 0, n_kv_heads = 0;  // KV heads [first, first + n)
  int64_t ffn_first = 0, d_ff = 0;            // FFN columns [first, first + d_ff)
};

// Throws InputError (one line naming --tensor-parallel) for a split the model cannot take: a
// mixture of experts, heads or FFN width not divisible by T, KV heads neither a multiple of T
// nor dividing it. Needs only the configuration (read_model_config).
TensorSliceShape tensor_slice_shape(const ModelConfig& whole, const TensorSlice& slice);

// The configuration of a rank's slice: n_heads, n_kv_heads and d_ff its own.
ModelConfig tensor_slice_config(const ModelConfig& whole, const TensorSlice& slice);

// Columns [first, first + count) of every row of a 2-D matrix, copied into `storage` (resized);
// the view points there. InputError (naming `name`) unless first and count are whole blocks of
// the matrix's type (32 elements for Q8_0/Q4_0, 256 for k-quants).
TensorView copy_columns(const TensorView& matrix, int64_t first, int64_t count, const char* name,
                        std::vector<uint8_t>& storage);

// Cuts a freshly built model (views made, nothing packed yet) to `slice`: the layers' views as
// above, config to tensor_slice_config, model.tensor_slice set. `mapping` (may be null): the file
// the views point into; the pages a column copy read are released. Throws InputError as
// tensor_slice_shape does, and for a row-parallel matrix whose column slice is not whole blocks.
void keep_tensor_slice(Model& model, const TensorSlice& slice, const MappedFile* mapping);

}  // namespace tandem
