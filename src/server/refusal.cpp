#include "server/refusal.h"

#include <exception>
#include <stdexcept>

#include "base/error.h"
#include "server/openai_protocol.h"

namespace tandem::server {

Refusal refusal_for_current_exception() {
  try {
    throw;
  } catch (const ApiError& e) {
    return Refusal{.status = e.status, .type = e.type, .message = e.what(), .internal_detail = {}};
  } catch (const InputError& e) {
    return Refusal{.status = 400, .type = "invalid_request_error", .message = e.what(), .internal_detail = {}};
  } catch (const std::exception& e) {
    return Refusal{.status = 500, .type = "server_error", .message = "internal error", .internal_detail = e.what()};
  } catch (...) {
    return Refusal{
        .status = 500, .type = "server_error", .message = "internal error", .internal_detail = "unknown exception"};
  }
}

}  // namespace tandem::server
