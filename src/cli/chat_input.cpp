// read_chat_input (see chat_input.h).
#include "cli/chat_input.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "cli/interrupt.h"

namespace tandem::cli {
namespace {

enum class LineStatus { Line, Interrupted, EndOfInput };

// One line without its '\n'. Byte by byte, so nothing past the line is taken from stdin
// (a pipe may hold the next messages).
LineStatus read_line(std::string& line) {
  line.clear();
  for (;;) {
    // Waiting in ppoll rather than read(): a Ctrl-C just before read() blocked would interrupt
    // nothing and wait for the next key.
    if (!wait_readable_or_interrupt(STDIN_FILENO)) return LineStatus::Interrupted;
    char c = 0;
    const ssize_t n = ::read(STDIN_FILENO, &c, 1);
    if (n == 1) {
      if (c == '\n') return LineStatus::Line;
      line += c;
    } else if (n == 0) {
      return line.empty() ? LineStatus::EndOfInput : LineStatus::Line;  // a last line without '\n'
    } else if (errno == EINTR) {
      if (take_interrupt()) return LineStatus::Interrupted;
    } else {
      return LineStatus::EndOfInput;
    }
  }
}

}  // namespace

ChatInput read_chat_input(const char* prompt, const char* continuation) {
  ChatInput input;
  std::fputs(prompt, stdout);
  std::fflush(stdout);
  bool pasting = false;
  bool first = true;
  for (std::string line;;) {
    const LineStatus status = read_line(line);
    if (status == LineStatus::Interrupted) return {ChatInput::Kind::Interrupted, ""};
    if (status == LineStatus::EndOfInput) {
      if (input.text.empty() && first) return {ChatInput::Kind::EndOfInput, ""};
      return input;  // what was typed before the end still counts
    }
    if (line == "\"\"\"") {
      if (pasting) return input;
      pasting = true;
    } else {
      const bool continues = !pasting && !line.empty() && line.back() == '\\';
      if (continues) line.pop_back();
      if (!first) input.text += '\n';
      input.text += line;
      first = false;
      if (!pasting && !continues) return input;
    }
    std::fputs(continuation, stdout);
    std::fflush(stdout);
  }
}

}  // namespace tandem::cli
