#include "server/refusal.h"

#include <exception>
#include <stdexcept>

#include "base/error.h"
#include "server/json_body.h"
#include "server/openai_protocol.h"

namespace tandem::server {

Refusal abandoned_refusal() {
  return Refusal{.status = 503,
                 .type = "server_error",
                 .message = "the server is shutting down; the request was not started",
                 .param = {},
                 .code = ErrorCode::None,
                 .internal_detail = {},
                 .abandoned = true};
}

Refusal refusal_for_current_exception() {
  try {
    throw;
  } catch (const BodyAbandoned&) {
    return abandoned_refusal();
  } catch (const ApiError& e) {
    return Refusal{.status = e.status,
                   .type = e.type,
                   .message = e.what(),
                   .param = e.param,
                   .code = e.code,
                   .internal_detail = {},
                   .abandoned = false};
  } catch (const InputError& e) {
    return Refusal{.status = 400,
                   .type = "invalid_request_error",
                   .message = e.what(),
                   .param = {},
                   .code = ErrorCode::None,
                   .internal_detail = {},
                   .abandoned = false};
  } catch (const std::exception& e) {
    return Refusal{.status = 500,
                   .type = "server_error",
                   .message = "internal error",
                   .param = {},
                   .code = ErrorCode::None,
                   .internal_detail = e.what(),
                   .abandoned = false};
  } catch (...) {
    return Refusal{.status = 500,
                   .type = "server_error",
                   .message = "internal error",
                   .param = {},
                   .code = ErrorCode::None,
                   .internal_detail = "unknown exception",
                   .abandoned = false};
  }
}

}  // namespace tandem::server
