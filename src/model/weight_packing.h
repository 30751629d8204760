// Repacks weight matrices into the layout the active kernels read fastest (today: AMX tiles
// for Q8_0/Q4_0), once, at load. The stored copy stays in the file map for anything else
// (embedding lookups) and its pages are released, so resident memory stays at one copy.
#pragma once

#include "io/mapped_file.h"
#include "model/model.h"

namespace tandem {

// No-op when the active kernels have no packed layout. `mapping` (may be null) is the file
// the views point into.
void pack_weights_for_kernels(Model& model, const MappedFile* mapping);

}  // namespace tandem
