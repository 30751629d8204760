// pack_weights_for_kernels: every matrix the forward pass multiplies by (the embedding table
// is only looked up, so it keeps its stored layout; a tied output head gets its own copy).
#include "model/weight_packing.h"

#include <memory>
#include <vector>

#include "kernels/amx/amx_gemm.h"
#include "kernels/kernel_table.h"

namespace tandem {

void pack_weights_for_kernels(Model& model, const MappedFile* mapping) {
  if (kernel_table().isa != Isa::Amx) return;
  ModelWeights& w = model.weights;
  std::vector<TensorView*> matrices = {&w.output};
  for (LayerWeights& layer : w.layers)
    for (TensorView* view : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down})
      matrices.push_back(view);
  for (TensorView* view : matrices) {
    if (!amx::packable(*view)) continue;
    auto packed = std::make_shared<std::vector<uint8_t>>(amx::pack(*view));
    view->packed = packed->data();
    model.storage.push_back(packed);
    if (mapping != nullptr && view->data != w.token_embedding.data)
      mapping->release_pages(view->data, static_cast<size_t>(view->n_bytes()));
  }
}

}  // namespace tandem
