// ServerProcess: starts the real `tandem serve` binary on a free loopback port (--port 0;
// the port is read from its "listening on" line), waits for /health, and stops it with
// SIGTERM, reporting the exit status. Tests drive it over plain HTTP or with Node.js. spawn()
// and wait_exit() run it without waiting for /health (start-up failures, shutdown timing).
// set_launcher() runs it under another program (mpirun -np 2 ... tandem serve ...).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/shared_data.h"

extern char** environ;

namespace tandem::testing {

class ServerProcess {
 public:
  // Starts `tandem serve -m MODEL --port 0 -t 2 <extra>` and waits for /health; false (with
  // log()) on failure. MODEL: `model`, or aidreams260K when empty.
  bool start(const std::vector<std::string>& extra, double timeout_s = 30.0, const std::string& model = "") {
    std::vector<std::string> args = {"serve", "-m", model.empty() ? shared_path(kAidreamsGguf) : model, "--port", "0",
                                     "-t",    "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return start_program(TANDEM_BINARY, args, timeout_s);
  }

  // Starts `program ARGS...` (e.g. mpirun running tandem serve --port 0 as one of its ranks)
  // and waits for /health on the port of the first "listening on" line it logs.
  bool start_program(const std::string& program, const std::vector<std::string>& args, double timeout_s = 30.0) {
    if (!spawn(args, program)) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      if (wait_port(0.0) != 0) {
        httplib::Client client("127.0.0.1", port_);
        const auto res = client.Get("/health");
        if (res && res->status == 200) return true;
      }
      if (wait_exit(0.0)) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // Every later start() and spawn() runs `LAUNCHER... tandem ARGS...`: `launcher`'s first word
  // is the program (found on PATH), the rest its arguments before the binary's path; pid() is
  // then the launcher's. Empty (the default): the binary itself.
  void set_launcher(std::vector<std::string> launcher) { launcher_ = std::move(launcher); }

  // Runs `tandem ARGS...` (stdout to /dev/null, stderr to log()) and returns at once, without
  // waiting for it to listen: for runs that are meant to fail, and for tests that watch start-up.
  // Only on a ServerProcess whose previous run (if any) has ended.
  bool spawn(const std::vector<std::string>& args_after_binary, const std::string& program = TANDEM_BINARY) {
    std::error_code ignored;
    if (!log_path_.empty()) std::filesystem::remove(log_path_, ignored);  // a previous run's
    log_path_ = std::filesystem::temp_directory_path() /
                ("tandem-server-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".log");
    std::vector<std::string> args = launcher_;
    args.push_back(program);
    args.insert(args.end(), args_after_binary.begin(), args_after_binary.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    port_ = 0;
    exit_code_ = -1;
    const int rc = posix_spawnp(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) pid_ = -1;
    return rc == 0;
  }

  // The port from the "listening on" line, waiting up to `timeout_s` for it; 0 if none yet.
  int wait_port(double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    const std::regex listening("listening on http://[0-9.]+:([0-9]+)");
    for (;;) {
      std::smatch match;
      const std::string text = log();
      if (port_ == 0 && std::regex_search(text, match, listening)) port_ = std::stoi(match[1]);
      if (port_ != 0 || std::chrono::steady_clock::now() >= deadline) return port_;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Waits up to `timeout_s` for the process to end; its exit code (128 + signal if killed),
  // or nullopt while it still runs. Does not signal it.
  std::optional<int> wait_exit(double timeout_s) {
    if (pid_ <= 0) return exit_code_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Sends a signal (SIGTERM to start a graceful shutdown) without waiting.
  void send_signal(int signal) const {
    if (pid_ > 0) ::kill(pid_, signal);
  }

  // Resident memory of the running server (VmRSS), in bytes; 0 when it cannot be read.
  int64_t rss_bytes() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmRSS:  1234 kB"
    return 0;
  }

  // SIGTERM, then the exit code (128 + signal if killed; -1 if it had to be SIGKILLed).
  int stop(double timeout_s = 20.0) {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, SIGTERM);
    if (const auto code = wait_exit(timeout_s)) return *code;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return exit_code_ = -1;
  }

  ~ServerProcess() {
    stop(5.0);
    std::error_code ignored;
    std::filesystem::remove(log_path_, ignored);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return read_file(log_path_); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }

 private:
  // Atomic: tests spawn servers from several threads at once, and two runs given the same
  // number would share (and truncate) one log file.
  static std::atomic<int>& counter() {
    static std::atomic<int> n{0};
    return n;
  }
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::filesystem::path log_path_;
  std::vector<std::string> launcher_;
};

}  // namespace tandem::testing
