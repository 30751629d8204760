// tandem tokenize: placeholder until implemented.
#include "base/error.h"
#include "cli/commands.h"

namespace tandem::cli {

void add_tokenize_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("tokenize", "(not implemented yet)");
  command->allow_extras();
  command->callback([] { throw InputError("'tokenize' is not implemented yet"); });
}

}  // namespace tandem::cli
