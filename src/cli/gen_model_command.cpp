// tandem gen-model: placeholder until implemented.
#include "base/error.h"
#include "cli/commands.h"

namespace tandem::cli {

void add_gen_model_command(CLI::App& app) {
  CLI::App* command = app.add_subcommand("gen-model", "(not implemented yet)");
  command->allow_extras();
  command->callback([] { throw InputError("'gen-model' is not implemented yet"); });
}

}  // namespace tandem::cli
