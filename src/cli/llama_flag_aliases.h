// llama.cpp's multi-letter single-dash flags (-ctk, -ctv, -np, -sys), which CLI11 cannot
// declare (a single dash takes one letter: -sys would parse as -s ys), rewritten to our long
// names before parsing. Only flags that mean the same thing in both are listed.
#pragma once

#include <string>
#include <vector>

namespace tandem::cli {

// argv with each alias (and ALIAS=VALUE) rewritten to its long name: -ctk -> --cache-type-k,
// -ctv -> --cache-type-v, -np -> --parallel, -sys -> --system.
std::vector<std::string> rewrite_llama_flags(int argc, const char* const* argv);

}  // namespace tandem::cli
