// The constrained-decoding flags of the commands that generate (run), spelled as llama.cpp's
// llama-cli spells them: --grammar GBNF, --grammar-file FILE, -j/--json-schema SCHEMA,
// --json-schema-file FILE. At most one is given; the engine compiles it per request.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tandem/tandem.h"

namespace tandem::cli {

// The flags as given (empty: not given).
struct GrammarFlags {
  std::string grammar, grammar_file, json_schema, json_schema_file;

  // Sets options->grammar or options->json_schema from the one flag given, reading a file
  // flag's file. InputError when more than one is given or a file cannot be read.
  void apply(api::GenerateOptions* options) const;
};

void add_grammar_options(CLI::App* command, GrammarFlags* flags);

}  // namespace tandem::cli
