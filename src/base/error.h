// Error kinds used across Tandem. Bad input (a malformed file, a bad prompt, a bad flag)
// throws InputError with one clear line; the CLI and server catch it at their boundary.
// Bugs are caught with TANDEM_ASSERT, which aborts: they are never a user's fault.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace tandem {

// Input that Tandem cannot use: the message names the problem in one line.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws InputError with a formatted message when `condition` is false.
#define TANDEM_CHECK_INPUT(condition, ...)                                  \
  do {                                                                      \
    if (!(condition)) throw ::tandem::InputError(fmt::format(__VA_ARGS__)); \
  } while (0)

// A broken internal invariant: print where and abort (a bug, not bad input).
#define TANDEM_ASSERT(condition)                                                                     \
  do {                                                                                               \
    if (!(condition)) {                                                                              \
      std::fprintf(stderr, "tandem: internal error: %s at %s:%d\n", #condition, __FILE__, __LINE__); \
      std::abort();                                                                                  \
    }                                                                                                \
  } while (0)

}  // namespace tandem
