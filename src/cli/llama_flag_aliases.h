// llama.cpp's multi-letter single-dash flags that Tandem takes (-ngl, -fa, -ctk, -ctv, -np,
// -ub, -cb, -sys; and vLLM's -tp), which CLI11 cannot declare (a single dash takes one letter: -ngl would parse
// as -n gl), rewritten to the long names the commands declare before parsing. The ones Tandem
// does not take are refused by the name typed (cli/foreign_flags.h). Also llama.cpp's
// -fa/--flash-attn, bare (older releases) or followed by on|off|auto (newer), as one token
// --flash-attn=VALUE.
#pragma once

#include <string>
#include <vector>

namespace tandem::cli {

struct RewrittenArgs {
  std::vector<std::string> args;   // what CLI11 parses (args[0]: the program)
  std::vector<std::string> typed;  // typed[i]: the flag as given, for args[i] (errors name it)
};

// argv with each alias (and ALIAS=VALUE) rewritten: -ctk -> --cache-type-k, -ctv ->
// --cache-type-v, -np -> --parallel, -sys -> --system, -ngl -> --n-gpu-layers, -ub ->
// --ubatch-size, -cb -> --cont-batching, -tp -> --tensor-parallel-size, -fa [on|off|auto] -> --flash-attn=VALUE.
RewrittenArgs rewrite_llama_flags(int argc, const char* const* argv);

// Whether `arg` has the shape of a llama.cpp multi-letter single-dash flag (-xyz: a dash,
// then two or more letters, digits or hyphens, starting with a letter), which CLI11 would
// split into one-letter flags and their values.
bool is_multi_letter_single_dash(const std::string& arg);

}  // namespace tandem::cli
