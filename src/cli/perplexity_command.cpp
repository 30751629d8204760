// tandem perplexity: placeholder until implemented.
#include "base/error.h"
#include "cli/commands.h"

namespace tandem::cli {

void add_perplexity_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("perplexity", "(not implemented yet)");
  command->allow_extras();
  command->callback([] { throw InputError("'perplexity' is not implemented yet"); });
}

}  // namespace tandem::cli
