// `tandem chat` driven through a pseudo-terminal, as a person at a terminal drives it: the
// test types lines (and Ctrl-C, Ctrl-D as the terminal's control characters, which the pty's
// line discipline turns into SIGINT and end of input) and reads what the terminal shows.
// Checks that the history is carried over turns (--show-prompt prints each turn's rendered
// prompt), that /reset forgets it, and that Ctrl-C stops one answer but not the program.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "support/run_binary.h"

namespace tandem::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// `tandem ARGS...` on the slave side of a new pty; everything it writes is collected from
// the master side, with the terminal's \r\n turned back into \n.
class TerminalSession {
 public:
  explicit TerminalSession(const std::vector<std::string>& args) {
    struct winsize size {};
    size.ws_row = 50;
    size.ws_col = 200;
    pid_ = ::forkpty(&master_, nullptr, nullptr, &size);
    if (pid_ == 0) {
      std::vector<char*> argv;
      std::string binary = TANDEM_BINARY;
      argv.push_back(binary.data());
      std::vector<std::string> copies = args;
      for (std::string& arg : copies) argv.push_back(arg.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
  }
  ~TerminalSession() {
    if (pid_ > 0 && !exit_code_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }

  bool started() const { return pid_ > 0 && master_ >= 0; }
  const std::string& output() const { return output_; }

  void type(const std::string& keys) {
    // Nothing else writes to the master: a short write only happens when the pty is full.
    ASSERT_EQ(::write(master_, keys.data(), keys.size()), static_cast<ssize_t>(keys.size()));
  }

  // Reads until the output after `from` matches `pattern`; the match's end offset, or
  // nullopt after `timeout_s` (or when the program ended first).
  std::optional<size_t> wait_for(const std::regex& pattern, size_t from, double timeout_s) {
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    for (;;) {
      std::smatch match;
      const std::string rest = output_.substr(std::min(from, output_.size()));
      if (std::regex_search(rest, match, pattern)) return from + match.position(0) + match.length(0);
      if (Clock::now() >= deadline || !read_some(deadline)) return std::nullopt;
    }
  }

  // The exit code once the program ends within `timeout_s`.
  std::optional<int> wait_exit(double timeout_s) {
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
    while (!exit_code_ && Clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      read_some(std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
    }
    return exit_code_;
  }

 private:
  // One read of what is there by `deadline`; false when the terminal closed.
  bool read_some(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd fd{master_, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(std::max<int64_t>(0, left))) <= 0) return true;
    char buffer[4096];
    const ssize_t n = ::read(master_, buffer, sizeof buffer);
    if (n <= 0) return false;  // EIO: the program has exited and closed its side
    for (ssize_t i = 0; i < n; ++i)
      if (buffer[i] != '\r') output_ += buffer[i];
    return true;
  }

  pid_t pid_ = -1;
  int master_ = -1;
  std::string output_;
  std::optional<int> exit_code_;
};

const std::regex kPrompt(R"((^|\n)> $)");
const std::regex kAnswerStats(
    R"(\[([0-9]+) tokens, [0-9.]+ tokens/s, TTFT [0-9.]+ ms, prompt ([0-9]+) tokens \(([0-9]+) cached\)([^\]]*)\]\n)");

struct Turn {
  std::string prompt;  // the rendered prompt --show-prompt printed
  std::string answer;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  std::string note;  // ", stopped", ", token limit" or empty
};

// Types `message` and reads the turn it starts, up to the next prompt.
std::optional<Turn> converse(TerminalSession& terminal, const std::string& message, double timeout_s = 30.0) {
  const size_t start = terminal.output().size();
  terminal.type(message + "\n");
  const std::optional<size_t> next_prompt = terminal.wait_for(kPrompt, start, timeout_s);
  if (!next_prompt) return std::nullopt;
  const std::string text = terminal.output().substr(start, *next_prompt - start);
  std::smatch prompt_match, stats_match;
  if (!std::regex_search(text, prompt_match,
                         std::regex(R"(--- prompt: [0-9]+ tokens ---\n([\s\S]*)\n--- end of prompt ---\n)")) ||
      !std::regex_search(text, stats_match, kAnswerStats))
    return std::nullopt;
  Turn turn;
  turn.prompt = prompt_match[1];
  const size_t answer_start = prompt_match.position(0) + prompt_match.length(0);
  turn.answer = text.substr(answer_start, stats_match.position(0) - answer_start);
  if (turn.answer.ends_with('\n')) turn.answer.pop_back();
  turn.prompt_tokens = std::stoi(stats_match[2]);
  turn.cached_tokens = std::stoi(stats_match[3]);
  turn.note = stats_match[4];
  return turn;
}

TEST(ChatTerminal, HistoryCarriesOverTurnsAndResetForgetsIt) {
  TANDEM_REQUIRE_SHARED(kAidreamsGguf);
  TerminalSession terminal({"chat", "-m", shared_path(kAidreamsGguf), "--chat-template", "llama2", "--temp", "0", "-n",
                            "12", "-t", "2", "--show-prompt"});
  ASSERT_TRUE(terminal.started());
  ASSERT_TRUE(terminal.wait_for(kPrompt, 0, 30.0)) << terminal.output();
  const std::optional<Turn> first = converse(terminal, "The dream");
  ASSERT_TRUE(first) << terminal.output();
  ASSERT_FALSE(first->answer.empty()) << terminal.output();
  const std::optional<Turn> second = converse(terminal, "And then?");
  ASSERT_TRUE(second) << terminal.output();
  // The second turn's prompt holds the first exchange, question and answer, and its KV came
  // from the prefix cache.
  EXPECT_NE(second->prompt.find("The dream"), std::string::npos) << second->prompt;
  EXPECT_NE(second->prompt.find(first->answer), std::string::npos)
      << "answer: " << first->answer << "\nprompt: " << second->prompt;
  EXPECT_GT(second->prompt_tokens, first->prompt_tokens) << terminal.output();
  EXPECT_GT(second->cached_tokens, 0) << terminal.output();

  // Multi-line input: a line ending in '\' continues.
  const size_t before_reset = terminal.output().size();
  terminal.type("/reset\n");
  // Up to the prompt that follows: typing earlier would let the next turn's wait take that
  // prompt for the end of the turn (seen in CI on a loaded machine).
  ASSERT_TRUE(terminal.wait_for(std::regex(R"(\(conversation cleared\)\n> $)"), before_reset, 10.0))
      << terminal.output();
  const std::optional<Turn> two_lines = converse(terminal, "The dream\\\nwent on");
  ASSERT_TRUE(two_lines) << terminal.output();
  EXPECT_NE(two_lines->prompt.find("The dream\nwent on"), std::string::npos) << two_lines->prompt;
  EXPECT_EQ(two_lines->prompt.find("And then?"), std::string::npos) << two_lines->prompt;  // forgotten
  EXPECT_EQ(two_lines->prompt.find(first->answer), std::string::npos) << two_lines->prompt;

  terminal.type("\x04");  // Ctrl-D: end of input at the prompt
  EXPECT_EQ(terminal.wait_exit(10.0), 0) << terminal.output();
}

TEST(ChatTerminal, CtrlCStopsTheAnswerNotTheProgram) {
  const std::string vocab = shared_path("tokenizers/llama.cpp-vocab/ggml-vocab-llama-spm.gguf");
  if (!fs::exists(vocab)) GTEST_SKIP() << "needs " << vocab;
  // A model whose answers run long: random weights seldom say EOS, and a long context lets
  // an answer go on for seconds.
  const fs::path model = fs::temp_directory_path() / ("tandem-chat-ctrl-c-" + std::to_string(::getpid()) + ".gguf");
  const CommandResult generated = run_tandem("gen-model --shape test-tiny --type Q8_0 --context 16384 --vocab-from " +
                                             shell_quote(vocab) + " -o " + shell_quote(model.string()));
  ASSERT_EQ(generated.exit_code, 0) << generated.err;
  TerminalSession terminal({"chat", "-m", model.string(), "--chat-template", "chatml", "--temp", "0", "-t", "2"});
  ASSERT_TRUE(terminal.started());
  ASSERT_TRUE(terminal.wait_for(kPrompt, 0, 30.0)) << terminal.output();
  for (const char* message : {"Tell me everything", "Again"}) {
    const size_t start = terminal.output().size();
    terminal.type(std::string(message) + "\n");
    // Wait for the answer to be under way: the echoed message, then some of the answer.
    ASSERT_TRUE(terminal.wait_for(std::regex(std::string(message) + "\n[\\s\\S]{40}"), start, 30.0))
        << terminal.output();
    terminal.type("\x03");  // Ctrl-C: the terminal sends SIGINT
    const std::optional<size_t> stats = terminal.wait_for(kAnswerStats, start, 10.0);
    ASSERT_TRUE(stats) << terminal.output().substr(start);
    const std::string line = terminal.output().substr(start, *stats - start);
    EXPECT_NE(line.find(", stopped]"), std::string::npos) << line.substr(line.rfind('['));
    // The program goes on: a new prompt.
    ASSERT_TRUE(terminal.wait_for(kPrompt, *stats, 10.0)) << terminal.output().substr(start);
  }
  // Ctrl-C at the prompt: a hint, and a second one ends the program.
  const size_t before = terminal.output().size();
  terminal.type("\x03");
  ASSERT_TRUE(terminal.wait_for(std::regex("Ctrl-C again to exit"), before, 10.0)) << terminal.output();
  terminal.type("\x03");
  EXPECT_EQ(terminal.wait_exit(10.0), 0) << terminal.output().substr(before);
  fs::remove(model);
}

}  // namespace
}  // namespace tandem::testing
