// pack_weights_for_kernels: every matrix the forward pass multiplies by (the embedding table
// is only looked up, so it keeps its stored layout; a tied output head gets its own copy).
#include "model/weight_packing.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "base/huge_page_buffer.h"
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
  // One buffer for every packed matrix: huge pages are 2 MiB, so one buffer per tensor would
  // leave up to a page of slack per tensor resident.
  // Each matrix starts on a cache line.
  auto padded_bytes = [](const TensorView& view) { return (static_cast<size_t>(amx::packed_bytes(view)) + 63) / 64 * 64; };
  size_t total = 0;
  for (TensorView* view : matrices)
    if (amx::packable(*view)) total += padded_bytes(*view);
  if (total == 0) return;
  auto buffer = std::make_shared<HugePageBuffer>(total);
  std::vector<std::pair<TensorView*, uint8_t*>> to_pack;  // matrix, where its packed copy goes
  size_t offset = 0;
  for (TensorView* view : matrices) {
    if (!amx::packable(*view)) continue;
    to_pack.emplace_back(view, buffer->data() + offset);
    view->packed = buffer->data() + offset;
    offset += padded_bytes(*view);
  }
  // Matrices are independent: pack them on every core (loading a 1 GiB model is otherwise
  // seconds of one core's work), each releasing its mapped original when done.
  std::atomic<size_t> next{0};
  auto pack_some = [&] {
    for (size_t i = next++; i < to_pack.size(); i = next++) {
      auto [view, destination] = to_pack[i];
      amx::pack_into(*view, destination);
      if (mapping != nullptr && view->data != w.token_embedding.data)
        mapping->release_pages(view->data, static_cast<size_t>(view->n_bytes()));
    }
  };
  std::vector<std::thread> workers;
  const unsigned n_workers = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < n_workers; ++i) workers.emplace_back(pack_some);
  pack_some();
  for (std::thread& worker : workers) worker.join();
  model.storage.push_back(buffer);
}

}  // namespace tandem
