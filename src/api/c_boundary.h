// The C API's boundary (include/tandem/tandem_c.h): the handle types behind its opaque
// pointers, the thread's last error message, and guarded(), which every C entry point runs
// its body through so that no exception ever reaches C: each becomes a status code and a
// message.
#pragma once

#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <vector>

#include "base/error.h"
#include "base/machine_memory.h"
#include "tandem/tandem.h"
#include "tandem/tandem_c.h"

struct tandem_model {
  std::shared_ptr<const tandem::api::Model> model;
};

struct tandem_engine {
  tandem::api::Engine engine;
};

struct tandem_stream {
  tandem::api::Stream stream;
  std::optional<tandem::api::Event> current;  // what the last tandem_event points into
  bool ended = false;                         // the final event has been handed out
};

namespace tandem::api::c_boundary {

// Copies `message` (truncated if very long) into this thread's last-error buffer; never throws.
void set_last_error(const char* message) noexcept;

// Records `message` and returns `status`: for failures found without an exception.
inline tandem_status fail(tandem_status status, const char* message) noexcept {
  set_last_error(message);
  return status;
}

// The messages as the C++ API takes them; nullopt when one (or its role or content) is NULL.
std::optional<std::vector<ChatMessage>> chat_messages(const tandem_chat_message* messages, size_t n_messages);

template <typename Body>
tandem_status guarded(Body&& body) noexcept {
  try {
    return body();
  } catch (const Error& error) {
    return fail(TANDEM_ERROR_INPUT, error.what());
  } catch (const InputError& error) {  // cannot happen through the C++ API, but never let it escape
    return fail(TANDEM_ERROR_INPUT, error.what());
  } catch (const std::bad_alloc&) {
    // The failed allocation was a large one: the message's few bytes are there, or it is the
    // plain phrase.
    try {
      return fail(TANDEM_ERROR_OUT_OF_MEMORY, out_of_memory_message().c_str());
    } catch (...) {
      return fail(TANDEM_ERROR_OUT_OF_MEMORY, "out of memory");
    }
  } catch (const std::exception& error) {
    return fail(TANDEM_ERROR_INTERNAL, error.what());
  } catch (...) {
    return fail(TANDEM_ERROR_INTERNAL, "unknown internal error");
  }
}

}  // namespace tandem::api::c_boundary
