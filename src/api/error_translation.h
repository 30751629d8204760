// The C++ API's error boundary: the internals throw tandem::InputError for bad input; callers
// of the public API see tandem::api::Error instead (the internal type is not part of the
// API, and libtandem.so does not export it). Every public entry point that can meet bad input
// runs its body through translating_errors().
#pragma once

#include <utility>

#include "base/error.h"
#include "tandem/tandem.h"

namespace tandem::api::detail {

template <typename Body>
decltype(auto) translating_errors(Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const InputError& error) {
    throw Error(error.what());
  }
}

}  // namespace tandem::api::detail
