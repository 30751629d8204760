// Runs the built `tandem` binary as a user would (through the shell) and captures its exit
// code, stdout and stderr, so end-to-end tests check exactly what a user sees. Used by the
// e2e and hf tests; shared_path and TANDEM_REQUIRE_SHARED come with it.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/shared_data.h"

namespace tandem::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

inline std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// `arguments` is appended to the binary's path verbatim (quote with shell_quote).
inline CommandResult run_tandem(const std::string& arguments) {
  static std::atomic<int> counter{0};  // callers may run on several threads
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tandem-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  const std::string command = shell_quote(TANDEM_BINARY) + " " + arguments + " > " +
                              shell_quote((dir / "out").string()) + " 2> " + shell_quote((dir / "err").string()) +
                              " < /dev/null";
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_text_file(dir / "out");
  result.err = read_text_file(dir / "err");
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace tandem::testing
