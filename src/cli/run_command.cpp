// tandem run: placeholder until implemented.
#include "base/error.h"
#include "cli/commands.h"

namespace tandem::cli {

void add_run_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("run", "(not implemented yet)");
  command->allow_extras();
  command->callback([] { throw InputError("'run' is not implemented yet"); });
}

}  // namespace tandem::cli
