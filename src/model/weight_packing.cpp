// pack_weights_for_kernels: every matrix the forward pass multiplies by, and the small vectors
// it reads (norms, biases), leave the file map for one huge-page buffer; the embedding table
// is only looked up, so it stays in the file map (a tied output head gets its own copy).
#include "model/weight_packing.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "base/huge_page_buffer.h"
#include "kernels/kernel_table.h"

namespace tandem {

namespace {

// Whether `view` lies in the file map (not an owned buffer or a null view).
bool file_holds(const MappedFile* mapping, const TensorView& view) {
  if (mapping == nullptr || view.data == nullptr) return false;
  const auto* p = static_cast<const uint8_t*>(view.data);
  return p >= mapping->bytes().data() && p < mapping->bytes().data() + mapping->bytes().size();
}

// Every matrix the forward pass multiplies by. A pipeline stage's model has null views where
// it does not hold the weights (the head, other layers): nothing of those is packed, and so
// none of their pages is read.
std::vector<TensorView*> matrices_of(ModelWeights& w) {
  std::vector<TensorView*> matrices;
  if (w.output.data != nullptr) matrices.push_back(&w.output);
  for (LayerWeights& layer : w.layers) {
    for (TensorView* view :
         {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate, &layer.w_up, &layer.w_down, &layer.router})
      if (view->data != nullptr) matrices.push_back(view);
    // Each expert is a matrix of its own (a slice of the file's stacked tensor).
    for (std::vector<TensorView>* experts : {&layer.expert_gate, &layer.expert_up, &layer.expert_down})
      for (TensorView& view : *experts) matrices.push_back(&view);
  }
  return matrices;
}

// Where everything goes in the one buffer: each matrix starting on a cache line, repacked when
// the level's kernels have a layout for its type, else copied as it is (still worth it: the
// huge pages); then the norm weights and biases.
struct PackPlan {
  struct Job {
    TensorView* view;
    size_t offset;
    bool repack;
  };
  std::vector<Job> jobs;
  std::vector<std::pair<TensorView*, size_t>> vectors;  // view, offset in the buffer
  size_t total = 0;
};

PackPlan plan_packing(ModelWeights& w, const WeightPacker& packer, const MappedFile* mapping) {
  PackPlan plan;
  for (TensorView* view : matrices_of(w)) {
    const bool repack = packer.packable != nullptr && packer.packable(*view);
    // Owned buffers (a tensor-parallel rank's column slices, converted weights) stay, and so
    // does a tied head (code tells tying by the shared pointer).
    if (!repack && (!file_holds(mapping, *view) || view->n_dims != 2 || view->data == w.token_embedding.data)) continue;
    plan.jobs.push_back({view, plan.total, repack});
    const size_t bytes = static_cast<size_t>(repack ? packer.packed_bytes(*view) : view->n_bytes());
    plan.total += (bytes + 63) / 64 * 64;
  }
  // Norm weights and biases: a few KiB each, but read in place from the map they pin every
  // 2 MiB page-cache folio they sit in (about 100 MiB resident for a 637 MiB Q4_K_M file).
  std::vector<TensorView*> small = {&w.output_norm};
  for (LayerWeights& layer : w.layers)
    for (TensorView* view :
         {&layer.attn_norm, &layer.ffn_norm, &layer.bq, &layer.bk, &layer.bv, &layer.q_norm, &layer.k_norm})
      small.push_back(view);
  for (TensorView* view : small) {
    if (!file_holds(mapping, *view)) continue;
    plan.vectors.emplace_back(view, plan.total);
    plan.total += (static_cast<size_t>(view->n_bytes()) + 63) / 64 * 64;
  }
  return plan;
}

// One matrix into `destination`, in slices of rows (whole 16-row groups), each slice's source
// pages released as soon as it is done: the peak never holds two copies of a large matrix (an
// output head is tens of MiB, next to a small model's hundred).
void pack_matrix(TensorView& view, uint8_t* destination, bool repack, bool release, const WeightPacker& packer,
                 const MappedFile* mapping) {
  const auto* original = static_cast<const uint8_t*>(view.data);
  uint8_t* const start = destination;
  constexpr int64_t kSliceRows = 1024;
  for (int64_t row = 0; row < view.n_rows(); row += kSliceRows) {
    TensorView slice = view;
    slice.data = original + row * view.row_bytes();
    slice.shape[0] = std::min(kSliceRows, view.n_rows() - row);
    if (repack) {
      packer.pack_into(slice, destination);
      destination += packer.packed_bytes(slice);
    } else {
      std::memcpy(destination, slice.data, static_cast<size_t>(slice.n_bytes()));
      destination += slice.n_bytes();
    }
    if (release) mapping->release_pages(original, static_cast<size_t>((row + slice.shape[0]) * view.row_bytes()));
  }
  if (repack)
    view.packed = start;
  else
    view.data = start;
}

// Nothing but the embedding is read from the map once the weights are packed: the rest is
// released (pages a slice's release missed, at slice edges or mapped again by a neighbour's
// fault-around).
void release_unread_pages(Model& model, const MappedFile* mapping) {
  const ModelWeights& w = model.weights;
  const std::span<const uint8_t> file = mapping->bytes();
  const auto* embedding = static_cast<const uint8_t*>(w.token_embedding.data);
  const bool embedding_mapped = embedding >= file.data() && embedding < file.data() + file.size();
  if (!embedding_mapped) {
    mapping->release_pages(file.data(), file.size());
    return;
  }
  mapping->release_pages(file.data(), static_cast<size_t>(embedding - file.data()));
  const uint8_t* after = embedding + w.token_embedding.n_bytes();
  mapping->release_pages(after, static_cast<size_t>(file.data() + file.size() - after));
  // Embedding rows are read with pread (Forward), not through the map: a lookup there
  // faulted in the 64 KiB around its row (fault-around; MADV_RANDOM does not stop it),
  // so a 512-token prompt of scattered ids kept most of a 26 MB table resident
  // (llama-160m Q8_0 peak RSS 195 MiB, over file + KV + 10 % = 190.7). A tied output
  // head still reads the map when it is not packed: its pages come back as needed.
  mapping->release_pages(embedding, static_cast<size_t>(w.token_embedding.n_bytes()));
  model.embedding_file = mapping;
}

}  // namespace

void pack_weights_for_kernels(Model& model, const MappedFile* mapping) {
  const WeightPacker& packer = kernel_table().packer;
  ModelWeights& w = model.weights;
  const PackPlan plan = plan_packing(w, packer, mapping);
  if (plan.total == 0) return;
  // One buffer for every matrix: huge pages are 2 MiB, so one buffer per tensor would leave
  // up to a page of slack per tensor resident.
  auto buffer = std::make_shared<HugePageBuffer>(plan.total);
  // Matrices are independent: pack them on every core (loading a 1 GiB model is otherwise
  // seconds of one core's work), each releasing its mapped original when done.
  std::atomic<size_t> next{0};
  auto pack_some = [&] {
    for (size_t i = next++; i < plan.jobs.size(); i = next++) {
      const PackPlan::Job& job = plan.jobs[i];
      const bool release = file_holds(mapping, *job.view) && job.view->data != w.token_embedding.data;
      pack_matrix(*job.view, buffer->data() + job.offset, job.repack, release, packer, mapping);
    }
  };
  std::vector<std::thread> workers;
  const unsigned n_workers = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 1; i < n_workers; ++i) workers.emplace_back(pack_some);
  pack_some();
  for (std::thread& worker : workers) worker.join();
  for (const auto& [view, offset] : plan.vectors) {
    std::memcpy(buffer->data() + offset, view->data, static_cast<size_t>(view->n_bytes()));
    view->data = buffer->data() + offset;
  }
  model.storage.push_back(buffer);
  model.packed_bytes = static_cast<int64_t>(plan.total);
  if (mapping != nullptr) release_unread_pages(model, mapping);
}

}  // namespace tandem
