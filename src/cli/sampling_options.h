// The sampling flags of the commands that generate on the public API (run, chat), spelled as
// llama.cpp spells them: --temp, --top-k, --top-p, --min-p, --repeat-penalty,
// --repeat-last-n, -s/--seed. One definition, so both commands take the same flags with
// the same defaults.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

#include "tandem/tandem.h"

namespace tandem::cli {

// Adds the flags to `command`, writing into *sampling and *seed (-1: a random seed).
void add_sampling_options(CLI::App* command, api::GenerateOptions* sampling, int64_t* seed);

}  // namespace tandem::cli
