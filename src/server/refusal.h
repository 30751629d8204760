// Refusal: why a request is answered with an error instead of a body — the HTTP status,
// OpenAI's error type and the message — decided from the exception that stopped its
// preparation. The endpoints prepare requests off the I/O thread and refuse them alike.
#pragma once

#include <string>

#include "server/openai_protocol.h"

namespace tandem::server {

struct Refusal {
  int status = 0;  // 0: no refusal
  std::string type;
  std::string message;  // sent to the client
  std::string param;    // the request field it is about (ApiError::param); empty: none
  ErrorCode code = ErrorCode::None;
  // A bug rather than the client's fault (status 500): the exception's text, for the server's
  // log only; the client reads "internal error".
  std::string internal_detail;
  // The preparation was stopped because nobody waits for it (json_body.h BodyAbandoned): its
  // client left, or the server is shutting down (then it is the 503 above).
  bool abandoned = false;

  bool refused() const { return status != 0; }
};

// The refusal of an abandoned request: 503 "the server is shutting down", abandoned.
Refusal abandoned_refusal();

// Call only inside a catch block. ApiError keeps its status, type, param and code; InputError (the
// client's data was bad) is a 400 invalid_request_error; BodyAbandoned is abandoned_refusal();
// anything else is a 500.
Refusal refusal_for_current_exception();

}  // namespace tandem::server
