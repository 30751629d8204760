// What `tandem chat` reads at its prompt: one message, maybe over several lines — a line
// ending in '\' continues on the next, and a line holding only """ opens (and another closes)
// a pasted block taken verbatim. Reads stdin with read(2) so that Ctrl-C (SIGINT, see
// interrupt.h) interrupts it instead of being retried. Input only; it knows no commands.
#pragma once

#include <string>

namespace tandem::cli {

struct ChatInput {
  enum class Kind { Message, Interrupted, EndOfInput };
  Kind kind = Kind::Message;
  std::string text;  // the message, lines joined by '\n' (Kind::Message)
};

// Prints `prompt` (and `continuation` before each further line) on stdout and reads one message.
ChatInput read_chat_input(const char* prompt, const char* continuation);

}  // namespace tandem::cli
