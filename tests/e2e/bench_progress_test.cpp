// `tandem bench` shows progress inside each test (after the warm-up and every timed run) on a
// terminal only: run on a pseudo-terminal its stderr carries the \r-redrawn progress line; with
// stderr a file, none of it.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

#include "support/run_binary.h"

namespace tandem::testing {
namespace {

// Runs `tandem ARGS...` on a new pty (stdout and stderr both) and returns what it wrote, or
// what it had written when `timeout_s` passed; *exit_code: its exit code (-1 if killed).
std::string run_on_terminal(const std::vector<std::string>& args, double timeout_s, int* exit_code) {
  struct winsize size {};
  size.ws_row = 50;
  size.ws_col = 200;
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &size);
  if (pid == 0) {
    std::vector<std::string> copies = args;
    std::string binary = TANDEM_BINARY;
    std::vector<char*> argv{binary.data()};
    for (std::string& arg : copies) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (pid > 0 && master >= 0 && std::chrono::steady_clock::now() < deadline) {
    struct pollfd fd {
      master, POLLIN, 0
    };
    if (::poll(&fd, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(master, buffer, sizeof(buffer));
    if (n <= 0) break;  // EIO: the program ended and closed the terminal
    output.append(buffer, static_cast<size_t>(n));
  }
  int status = 0;
  *exit_code = -1;
  while (pid > 0) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    ::usleep(10000);
  }
  if (master >= 0) ::close(master);
  return output;
}

TEST(CliProgress, BenchShowsRunsInsideEachTestOnATerminal) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  int exit_code = 0;
  const std::string shown = run_on_terminal(
      {"bench", "-m", shared_path(kAidreamsGguf), "-p", "16", "-n", "4", "-r", "2", "-t", "1"}, 60.0, &exit_code);
  ASSERT_EQ(exit_code, 0) << shown;
  EXPECT_NE(shown.find("\r\033[Kbench: pp16 warm-up done"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\r\033[Kbench: pp16 run 2/2 done"), std::string::npos) << shown;
  EXPECT_NE(shown.find("\r\033[Kbench: tg4 run 1/2 done"), std::string::npos) << shown;
  EXPECT_NE(shown.find("tg4 |"), std::string::npos) << shown;  // the rows still come
}

TEST(CliProgress, BenchShowsNoProgressWhenStderrIsAFile) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  const CommandResult result =
      run_tandem("bench -m " + shell_quote(shared_path(kAidreamsGguf)) + " -p 16 -n 4 -r 2 -t 1");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.err.find('\r'), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("bench:"), std::string::npos) << result.err;
  EXPECT_NE(result.out.find("tg4 |"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace tandem::testing
