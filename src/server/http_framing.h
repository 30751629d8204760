// How the server reads an HTTP/1.x request off the wire: the Beast parser's configuration and
// the framing checks Beast leaves to us (RFC 9112 section 6), as plain functions of bytes and
// heads, so that the server (http/session.cpp) and the fuzzer (fuzz/fuzz_http_framing.cpp)
// run the same code. A request whose length cannot be known for certain is refused and its
// connection closed: no byte of it may be read as the next request (request smuggling).
// No sockets here; what to answer and when to close is the session's.
#pragma once

#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

struct FramingLimits {
  size_t max_header_bytes = 16 << 10;  // a longer head: 431
  size_t max_body_bytes = 8 << 20;     // a longer body, any encoding: 413
};

// A fresh parser for one request, configured as the server reads every request.
void configure_request_parser(RequestParser& parser, const FramingLimits& limits);

// Why a request is answered with an error and its connection closed.
struct FramingRefusal {
  int status = 400;  // 400, or 501 for a transfer coding the server does not implement
  std::string message;
};

// The checks on a complete head that Beast does not make: Transfer-Encoding must be exactly
// "chunked" (one coding, any letter case, in one field), never beside Content-Length and never
// in HTTP/1.0 (RFC 9112 6.1 and 6.3). Beast reads a coding it does not know ("xchunked",
// "identity", "gzip", "chunked, identity") as no body at all, and ignores a coding before
// "chunked" ("gzip, chunked"): either way the body's bytes would be read as the next request.
std::optional<FramingRefusal> check_framing(const RequestParser::value_type& head);

// The 400 for an error the parser reported while reading a head or body (a malformed request
// line, header or chunk size), or nothing for an error that is not about the request's bytes
// (the peer left, the time ran out, a limit: the session answers those itself).
std::optional<FramingRefusal> framing_refusal(const boost::system::error_code& error);

// The requests in `bytes` as a connection would read them, one after another (pipelining):
// each parsed with a fresh configured parser, fed in pieces of `segment` bytes (as TCP may
// deliver them; 0: all at once), its head checked. Reading stops at the first refusal, at an
// incomplete request, or at a request the server would answer before its body (over the body
// limit): the connection closes there. For the fuzzer and the tests.
struct ReadRequest {
  std::string method;
  std::string target;
  unsigned version = 11;
  std::string body;
  bool keep_alive = true;
  size_t end = 0;  // the offset in the bytes just past it
};
struct ConnectionRead {
  std::vector<ReadRequest> requests;      // read whole and accepted, in order
  std::optional<FramingRefusal> refusal;  // the request after them was refused
  bool over_limit = false;                // the request after them broke a size limit (431/413)
  size_t consumed = 0;                    // bytes taken by `requests`
};
ConnectionRead read_connection(std::string_view bytes, const FramingLimits& limits, size_t segment = 0);

}  // namespace tandem::server
