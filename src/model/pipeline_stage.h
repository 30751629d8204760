// Pipeline stages (issue 16's --pipeline S): a model's layers split into contiguous ranges, each
// loaded and run by its own stage (an MPI rank; here, anything that holds one Model per stage).
//
// What a stage holds: the weights of its layers [first, end) only; the token embedding only
// if it has layer 0; the final norm and the output head (a tied head as its own copy of the
// embedding) only if it has the last layer; a KV cache of its own layers only (Model::kv_shape).
// The other layers' tensors are neither packed nor paged in from the file.
//
// What stages exchange, per batch: every stage runs the same Batch (token ids, positions,
// sequence ids, block tables, wants_logits); the first stage embeds the token ids, and each
// stage hands the next the hidden state of every token of the batch, [n_tokens, d_model] f32
// row-major in batch order (Forward::run_stage). The last stage returns the logits rows.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace tandem {

// S contiguous ranges covering [0, n_layers), sizes differing by at most one (the earlier
// stages get the extra layers: the last stage also holds the output head).
// Throws InputError unless 1 <= n_stages <= n_layers.
std::vector<LayerRange> split_layers(int64_t n_layers, int64_t n_stages);

// Throws InputError (one line) unless 0 <= first < end <= n_layers.
void check_layer_range(const LayerRange& range, int64_t n_layers);

// Drops from a freshly built model (views made, nothing packed yet) every weight a stage of
// `range` does not hold, and records the range: layers outside it become empty LayerWeights,
// the embedding goes unless the range starts at 0, the final norm and head unless it ends at
// the last layer. Throws InputError for a bad range.
void keep_layer_range(Model& model, const LayerRange& range);

// Bytes of the weights a stage of `range` would hold, from a model that holds all of them (as
// weight_bytes_total counts them: a tied head held without the embedding counts its own bytes).
int64_t stage_weight_bytes(const Model& whole, const LayerRange& range);

}  // namespace tandem
