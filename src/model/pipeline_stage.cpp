// Layer ranges of pipeline stages (see pipeline_stage.h): the split, its checks, and what a
// stage keeps of a model's weights and how many bytes that is.
#include "model/pipeline_stage.h"

#include "base/error.h"

namespace tandem {

std::vector<LayerRange> split_layers(int64_t n_layers, int64_t n_stages) {
  TANDEM_CHECK_INPUT(n_stages >= 1 && n_stages <= n_layers,
                     "a pipeline of {} stages over {} layers (each stage needs at least one layer)", n_stages,
                     n_layers);
  std::vector<LayerRange> ranges;
  int64_t first = 0;
  for (int64_t s = 0; s < n_stages; ++s) {
    const int64_t size = n_layers / n_stages + (s < n_layers % n_stages ? 1 : 0);
    ranges.push_back({first, first + size});
    first += size;
  }
  return ranges;
}

void check_layer_range(const LayerRange& range, int64_t n_layers) {
  TANDEM_CHECK_INPUT(range.first >= 0 && range.first < range.end && range.end <= n_layers,
                     "layer range [{}, {}) is empty or outside the model's layers [0, {})", range.first, range.end,
                     n_layers);
}

void keep_layer_range(Model& model, const LayerRange& range) {
  const int64_t n_layers = model.config.n_layers;
  check_layer_range(range, n_layers);
  ModelWeights& w = model.weights;
  TANDEM_ASSERT(static_cast<int64_t>(w.layers.size()) == n_layers && model.packed_bytes == 0);
  for (int64_t l = 0; l < n_layers; ++l)
    if (l < range.first || l >= range.end) w.layers[static_cast<size_t>(l)] = LayerWeights{};
  // A tied head is a view of its own onto the embedding's bytes: it stays when the table goes.
  if (range.first > 0) w.token_embedding = TensorView{};
  if (range.end < n_layers) {
    w.output_norm = TensorView{};
    w.output = TensorView{};
  }
  model.stage = range;
}

int64_t stage_weight_bytes(const Model& whole, const LayerRange& range) {
  TANDEM_ASSERT(!whole.stage.has_value());
  check_layer_range(range, whole.config.n_layers);
  const ModelWeights& w = whole.weights;
  int64_t total = 0;
  for (int64_t l = range.first; l < range.end; ++l) total += layer_weight_bytes(w.layers[static_cast<size_t>(l)]);
  const bool embedding = range.first == 0, head = range.end == whole.config.n_layers;
  if (embedding) total += w.token_embedding.n_bytes();
  if (head) {
    total += w.output_norm.n_bytes();
    // A tied head is the embedding's bytes, counted once where the stage holds both.
    if (w.output.data != w.token_embedding.data || !embedding) total += w.output.n_bytes();
  }
  return total;
}

}  // namespace tandem
