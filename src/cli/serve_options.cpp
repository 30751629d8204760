#include "cli/serve_options.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "chat/model_chat_renderer.h"
#include "server/chat_request.h"
#include "server/cors.h"
#include "server/model_names.h"
#include "server/request_log.h"

namespace tandem::cli {

namespace {

// Only async-signal-safe calls here.
extern "C" void exit_while_loading(int signal) {
  static constexpr char kMessage[] = "tandem serve: stopped while loading the model\n";
  [[maybe_unused]] const ssize_t written = ::write(2, kMessage, sizeof(kMessage) - 1);
  ::_exit(128 + signal);
}

}  // namespace

void say(const ServeOptions& options, const std::string& message, std::string_view level) {
  const std::string line = server::log_message_line(level, message, options.http.log_format);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

chat::ChatRenderer choose_chat_renderer(const ServeOptions& options, const Tokenizer& tokenizer) {
  std::string fallback_reason;
  chat::ChatRenderer renderer =
      chat::model_chat_renderer(options.model_path, tokenizer, options.chat_template, &fallback_reason);
  if (!fallback_reason.empty())
    say(options,
        fmt::format("the model's chat template does not parse ({}); using the built-in {}", fallback_reason,
                    chat::chat_format_name(renderer.format)),
        "warning");
  return renderer;
}

server::ServerConfig http_config_of(const ServeOptions& options) {
  server::ServerConfig http_config = options.http;
  if (!options.chat_template_kwargs.empty())
    http_config.chat_template_kwargs = server::parse_template_kwargs_flag(options.chat_template_kwargs);
  http_config.cors = server::parse_allowed_origins(options.allowed_origins);
  return http_config;
}

server::ServedModel served_model_of(const ServeOptions& options) {
  server::ServedModel served{server::parse_served_model_names(options.served_model_names), options.model_path};
  if (served.names.empty()) served.names.push_back(std::filesystem::path(options.model_path).filename().string());
  return served;
}

sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

void begin_loading(const sigset_t& signals) {
  struct sigaction loading {};
  loading.sa_handler = exit_while_loading;
  sigaction(SIGINT, &loading, nullptr);
  sigaction(SIGTERM, &loading, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
}

void end_loading(const sigset_t& signals) {
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before the engine's threads start
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

void return_freed_memory() {
  ::mallopt(M_MMAP_THRESHOLD, 4 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 8 << 20);
}

int wait_for_signal(const sigset_t& signals) {
  for (;;) {
    const int signal = sigwaitinfo(&signals, nullptr);
    if (signal > 0) return signal;
  }
}

void exit_on_second_signal(const sigset_t& signals) {
  // Detached: it ends with the process, either way.
  std::thread([signals] {
    const int signal = wait_for_signal(signals);
    const std::string line = fmt::format("tandem serve: second {} received; exiting without finishing the drain\n",
                                         signal == SIGINT ? "SIGINT" : "SIGTERM");
    [[maybe_unused]] const ssize_t written = ::write(2, line.data(), line.size());
    ::_exit(128 + signal);
  }).detach();
}

}  // namespace tandem::cli
