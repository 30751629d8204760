// The CPU levels (kernel_table(isa)) this machine runs, for kernel tests that hold every
// level against a scalar reference: the levels the CPU lacks are printed as skipped, so a
// run on an older machine says what it did not cover.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"

namespace tandem {

inline std::vector<Isa> supported_levels() {
  std::vector<Isa> levels;
  std::string skipped;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx}) {
    if (static_cast<int>(isa) <= static_cast<int>(detect_isa()))
      levels.push_back(isa);
    else
      skipped.append(" ").append(isa_name(isa));
  }
  if (!skipped.empty()) std::cout << "[ skipped  ] levels not on this CPU:" << skipped << "\n";
  return levels;
}

}  // namespace tandem
