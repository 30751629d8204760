// --grammar, --grammar-file, --json-schema, --json-schema-file (see grammar_options.h).
#include "cli/grammar_options.h"

#include <fstream>
#include <sstream>

#include "base/error.h"

namespace tandem::cli {
namespace {

std::string read_text_file(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  TANDEM_CHECK_INPUT(in.good(), "{}: cannot read '{}'", flag, path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void GrammarFlags::apply(api::GenerateOptions* options) const {
  const int given = !grammar.empty() + !grammar_file.empty() + !json_schema.empty() + !json_schema_file.empty();
  TANDEM_CHECK_INPUT(given <= 1, "give at most one of --grammar, --grammar-file, --json-schema, --json-schema-file");
  if (!grammar.empty()) options->grammar = grammar;
  if (!grammar_file.empty()) options->grammar = read_text_file(grammar_file, "--grammar-file");
  if (!json_schema.empty()) options->json_schema = json_schema;
  if (!json_schema_file.empty()) options->json_schema = read_text_file(json_schema_file, "--json-schema-file");
}

void add_grammar_options(CLI::App* command, GrammarFlags* flags) {
  command->add_option("--grammar", flags->grammar, "Constrain the output to a GBNF grammar (llama.cpp's syntax)");
  command->add_option("--grammar-file", flags->grammar_file, "Constrain the output to the GBNF grammar in FILE");
  command->add_option("-j,--json-schema", flags->json_schema,
                      "Constrain the output to a JSON Schema ('{}': any JSON value)");
  command->add_option("--json-schema-file", flags->json_schema_file, "Constrain the output to the JSON Schema in FILE");
}

}  // namespace tandem::cli
