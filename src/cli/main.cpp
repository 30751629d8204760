// tandem: the command-line front end. A thin layer over the tandem_core library: parse
// flags, call the library, print. Bad input ends with one line on stderr and exit code 1.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "base/build_info.h"
#include "base/error.h"
#include "base/machine_memory.h"
#include "cli/commands.h"
#include "cli/foreign_flags.h"
#include "cli/llama_flag_aliases.h"
#include "tandem/tandem.h"

int main(int argc, char** argv) {
  CLI::App app{"Tandem: an LLM inference engine for Llama-family models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", tandem::version_line(), "Print the version and git commit, then exit");
  tandem::cli::add_run_command(app);
  tandem::cli::add_chat_command(app);
  tandem::cli::add_tokenize_command(app);
  tandem::cli::add_perplexity_command(app);
  tandem::cli::add_logits_command(app);
  tandem::cli::add_info_command(app);
  tandem::cli::add_gen_model_command(app);
  tandem::cli::add_bench_command(app);
  tandem::cli::add_serve_command(app);
  tandem::cli::add_chat_template_command(app);
  tandem::cli::add_convert_command(app);
  // llama.cpp's -ngl, -fa, -ctk, -ctv, -np, -ub, -cb, -sys, which CLI11 cannot declare, as our
  // long names; what was typed is kept for the errors.
  const tandem::cli::RewrittenArgs args = tandem::cli::rewrite_llama_flags(argc, argv);
  try {
    tandem::cli::refuse_foreign_flags(app, args);  // llama.cpp's and vLLM's flags Tandem does not take
    std::vector<const char*> arg_pointers;
    for (const std::string& arg : args.args) arg_pointers.push_back(arg.c_str());
    app.parse(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  } catch (const CLI::ExtrasError&) {
    std::fprintf(stderr, "tandem: error: %s\n", tandem::cli::unexpected_arguments_message(app, args).c_str());
    return 1;
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const tandem::InputError& error) {
    std::fprintf(stderr, "tandem: error: %s\n", error.what());
    return 1;
  } catch (const tandem::api::Error& error) {  // from the commands built on the public API
    std::fprintf(stderr, "tandem: error: %s\n", error.what());
    return 1;
  } catch (const std::bad_alloc&) {
    try {
      std::fprintf(stderr, "tandem: error: %s\n", tandem::out_of_memory_message().c_str());
    } catch (const std::bad_alloc&) {  // not even the message's few bytes
      std::fprintf(stderr, "tandem: error: out of memory\n");
    }
    return 1;
  }
  return 0;
}
