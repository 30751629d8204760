// tandem info: placeholder until implemented.
#include "base/error.h"
#include "cli/commands.h"

namespace tandem::cli {

void add_info_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("info", "(not implemented yet)");
  command->allow_extras();
  command->callback([] { throw InputError("'info' is not implemented yet"); });
}

}  // namespace tandem::cli
