// Each subcommand lives in its own file and registers itself on the top-level CLI::App.
// The callbacks run the command; they throw InputError for bad input (main prints it).
#pragma once

#include <CLI/CLI.hpp>

namespace tandem::cli {

void add_run_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_perplexity_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_gen_model_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_chat_template_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_convert_command(CLI::App& app);

}  // namespace tandem::cli
