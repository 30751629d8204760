// llama-server's, llama-cli's and vLLM's flags that a Tandem command does not take, refused
// in one line that names the flag as typed and Tandem's equivalent where one exists, before
// CLI11 parses (which would split -tb into -t b, or read -hf as -h and print the help); and
// the one-line message for whatever else CLI11 finds unexpected, in the order given.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "cli/llama_flag_aliases.h"

namespace tandem::cli {

// Throws InputError for the first flag after the subcommand that the subcommand does not
// declare and that is a known llama.cpp/vLLM flag (the table in the .cpp: its advice), a flag
// other subcommands take (naming them: -np is serve's), or a multi-letter single-dash flag
// (CLI11 would split it). Tokens that are the value of the option before them are not flags.
void refuse_foreign_flags(CLI::App& app, const RewrittenArgs& args);

// After CLI11's ExtrasError: "`tandem CMD` does not take: A, B, C (see tandem CMD --help)",
// the arguments as typed and in the order given.
std::string unexpected_arguments_message(CLI::App& app, const RewrittenArgs& args);

}  // namespace tandem::cli
