// Moves the weight matrices of a mapped file into one huge-page buffer at load, repacked into
// the layout the active kernels read fastest where they have one (AMX tiles for Q8_0, Q4_0,
// Q4_K, Q6_K) and copied as they are otherwise: streaming them per token then costs far
// fewer TLB misses. The mapped originals' pages are released, so resident memory stays at
// one copy; the embedding table stays in the file map (it is only looked up).
#pragma once

#include "io/mapped_file.h"
#include "model/model.h"

namespace tandem {

// `mapping` is the file the views point into; when null (weights in owned buffers), only
// matrices the kernels repack are touched.
void pack_weights_for_kernels(Model& model, const MappedFile* mapping);

}  // namespace tandem
