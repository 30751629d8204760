// libFuzzer target for how the server reads requests off a connection (server/http_framing.h,
// the same parser configuration and framing checks http/session.cpp uses): request lines,
// headers, chunked bodies and pipelined requests. Any bytes must be read without a crash or a
// sanitizer report, every request read must be within the limits, and what is read must not
// depend on how TCP cuts the bytes: the input is read whole and again in segments of 2-17
// bytes (its first byte picks the size), and both reads must agree request for request. A
// parser that splits a stream differently depending on the segments is how requests are
// smuggled. Seeds live in fuzz/seeds/fuzz_http_framing/ (each starts with that byte).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/http_framing.h"

namespace {

bool same(const tandem::server::ReadRequest& a, const tandem::server::ReadRequest& b) {
  return a.method == b.method && a.target == b.target && a.version == b.version && a.body == b.body &&
         a.keep_alive == b.keep_alive && a.end == b.end;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 1 << 16) return 0;  // long inputs add nothing but time
  // Not 1: Beast 1.81 asserts (debug builds only; the code after the assert is right) when a
  // final chunk's "0\r\n" and its closing CRLF arrive in pieces of one byte (boostorg/beast
  // PR 2861, fixed in Boost 1.86).
  const size_t segment = 2 + data[0] % 16;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  // Small limits, so that inputs reach them.
  const tandem::server::FramingLimits limits{.max_header_bytes = 1024, .max_body_bytes = 4096};
  const tandem::server::ConnectionRead whole = tandem::server::read_connection(bytes, limits);
  const tandem::server::ConnectionRead pieces = tandem::server::read_connection(bytes, limits, segment);

  if (whole.consumed > bytes.size()) std::abort();
  for (const tandem::server::ReadRequest& request : whole.requests)
    if (request.body.size() > limits.max_body_bytes) std::abort();
  // The requests read, and where each ends, must be the same. How the reading ends after them
  // may differ: Beast flags a bare CR in a head when it sees the whole head at once, but when
  // the CR ends a segment it waits for more (one reading refuses what the other still waits
  // on: either way nothing more is read); and its head limit has some slack when a head
  // arrives whole (a head a little over it is read, or stopped at the limit, by the reading
  // that stops there).
  const size_t common = std::min(whole.requests.size(), pieces.requests.size());
  for (size_t i = 0; i < common; ++i)
    if (!same(whole.requests[i], pieces.requests[i])) std::abort();
  if (whole.requests.size() != pieces.requests.size()) {
    const tandem::server::ConnectionRead& shorter = whole.requests.size() < pieces.requests.size() ? whole : pieces;
    if (!shorter.over_limit) std::abort();
  }
  if (whole.refusal && whole.refusal->message.empty()) std::abort();
  return 0;
}
