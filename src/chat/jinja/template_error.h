// The one exception a chat template raises: bad syntax, an unsupported construct, a runtime
// type error, or the template's own raise_exception(). It is bad input (an InputError), so
// the CLI prints it as one line; the line number is added where the failing node is known.
#pragma once

#include <string>

#include <fmt/format.h>

#include "base/error.h"

namespace tandem::jinja {

class TemplateError : public InputError {
 public:
  explicit TemplateError(const std::string& message, int line = 0)
      : InputError(line > 0 ? fmt::format("chat template line {}: {}", line, message)
                            : fmt::format("chat template: {}", message)),
        message_(message),
        line_(line) {}

  const std::string& message() const { return message_; }
  int line() const { return line_; }

 private:
  std::string message_;
  int line_;
};

}  // namespace tandem::jinja
