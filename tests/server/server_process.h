// ServerProcess: starts the real `tandem serve` binary on a free loopback port (--port 0;
// the port is read from its "listening on" line), waits for /health, and stops it with
// SIGTERM, reporting the exit status. Tests drive it over plain HTTP or with Node.js.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tandem::testing {

inline std::string shared_path(const std::string& relative) { return std::string(TANDEM_SHARED_DIR) + "/" + relative; }

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

class ServerProcess {
 public:
  // Starts `tandem serve -m MODEL --port 0 <extra>`; returns false (with log()) on failure.
  bool start(const std::vector<std::string>& extra, double timeout_s = 30.0) {
    log_path_ = std::filesystem::temp_directory_path() /
                ("tandem-server-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++) + ".log");
    std::vector<std::string> args = {TANDEM_BINARY, "serve", "-m", shared_path("models/aidreams260K/model.gguf"),
                                     "--port", "0", "-t", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int rc = posix_spawn(&pid_, TANDEM_BINARY, &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    const std::regex listening("listening on http://[0-9.]+:([0-9]+)");
    while (std::chrono::steady_clock::now() < deadline) {
      std::smatch match;
      const std::string text = log();
      if (port_ == 0 && std::regex_search(text, match, listening)) port_ = std::stoi(match[1]);
      if (port_ != 0) {
        httplib::Client client("127.0.0.1", port_);
        const auto res = client.Get("/health");
        if (res && res->status == 200) return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // SIGTERM, then the exit code (128 + signal if killed; -1 if it had to be SIGKILLed).
  int stop(double timeout_s = 20.0) {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
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
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return read_file(log_path_); }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(30, 0);
    return c;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
  std::filesystem::path log_path_;
};

}  // namespace tandem::testing
