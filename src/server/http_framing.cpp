// Request framing (see http_framing.h): Beast parses the bytes; what it accepts that RFC 9112
// does not (a transfer coding other than chunked) is refused here.
#include "server/http_framing.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace tandem::server {

namespace http = boost::beast::http;

namespace {

// A header value as an error message quotes it: trimmed, cut short when long.
std::string quoted(std::string_view value) {
  std::string text(value.substr(0, 64));
  if (value.size() > 64) text += "...";
  return "'" + text + "'";
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

void configure_request_parser(RequestParser& parser, const FramingLimits& limits) {
  parser.header_limit(static_cast<uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
  parser.body_limit(limits.max_body_bytes);
}

std::optional<FramingRefusal> check_framing(const RequestParser::value_type& head) {
  const auto [first, last] = head.equal_range(http::field::transfer_encoding);
  if (first == last) return std::nullopt;
  if (std::next(first) != last)
    return FramingRefusal{400, "the request has more than one Transfer-Encoding field: its body's length is ambiguous"};
  const std::string_view value = trimmed(first->value());
  if (head.version() < 11)
    return FramingRefusal{400, "Transfer-Encoding in an HTTP/1.0 request: its body's length is ambiguous"};
  if (head.find(http::field::content_length) != head.end())
    return FramingRefusal{400,
                          "the request has both Content-Length and Transfer-Encoding: its body's length is ambiguous"};
  if (boost::beast::iequals(value, "chunked")) return std::nullopt;
  // The last coding decides the framing (RFC 9112 6.3): chunked last is a body this server
  // could delimit but not decode (501); anything else has no length it can know (400).
  const size_t comma = value.rfind(',');
  const std::string_view final_coding = trimmed(comma == std::string_view::npos ? value : value.substr(comma + 1));
  if (comma != std::string_view::npos && boost::beast::iequals(final_coding, "chunked"))
    return FramingRefusal{501, fmt::format("Transfer-Encoding {}: only 'chunked' is implemented", quoted(value))};
  return FramingRefusal{
      400,
      fmt::format("Transfer-Encoding {} does not end in 'chunked': the body's length cannot be known", quoted(value))};
}

std::optional<FramingRefusal> framing_refusal(const boost::system::error_code& error) {
  if (error.category() != http::make_error_code(http::error::bad_chunk).category()) return std::nullopt;
  switch (static_cast<http::error>(error.value())) {
    case http::error::bad_line_ending:
    case http::error::bad_method:
    case http::error::bad_target:
    case http::error::bad_version:
    case http::error::bad_field:
    case http::error::bad_value:
    case http::error::bad_content_length:
    case http::error::bad_transfer_encoding:
    case http::error::bad_chunk:
    case http::error::bad_chunk_extension:
    case http::error::bad_obs_fold:
    case http::error::multiple_content_length:
    case http::error::unexpected_body: return FramingRefusal{400, "malformed HTTP request: " + error.message()};
    default: return std::nullopt;
  }
}

ConnectionRead read_connection(std::string_view bytes, const FramingLimits& limits, size_t segment) {
  ConnectionRead out;
  const size_t step = segment == 0 ? bytes.size() : segment;
  size_t at = 0;        // the first byte not consumed by a parser
  size_t received = 0;  // the bytes delivered so far
  while (at < bytes.size()) {
    RequestParser parser;
    configure_request_parser(parser, limits);
    boost::system::error_code ec;
    // Feeds what has been received until `done`, delivering another segment when the parser
    // needs more; false at the end of the bytes or on an error (left in ec).
    const auto feed = [&](auto done) {
      while (!done()) {
        if (at == received) {
          if (received == bytes.size()) return false;  // the connection ends inside the request
          received = std::min(bytes.size(), received + step);
        }
        at += parser.put(boost::asio::buffer(bytes.data() + at, received - at), ec);
        if (ec == http::error::need_more) {
          ec = {};
          if (received == bytes.size()) return false;
          received = std::min(bytes.size(), received + step);
        } else if (ec) {
          return false;
        }
      }
      return true;
    };
    parser.eager(false);  // as http::async_read_header reads
    if (!feed([&] { return parser.is_header_done(); })) {
      if (ec == http::error::header_limit || ec == http::error::body_limit) out.over_limit = true;
      if (!ec) return out;
      out.refusal = framing_refusal(ec);
      return out;
    }
    if (auto refusal = check_framing(parser.get())) {
      out.refusal = std::move(refusal);
      return out;
    }
    parser.eager(true);  // as http::async_read reads the body
    if (!feed([&] { return parser.is_done(); })) {
      if (ec == http::error::body_limit) out.over_limit = true;
      if (ec) out.refusal = framing_refusal(ec);
      return out;
    }
    const RequestParser::value_type& request = parser.get();
    out.requests.push_back(ReadRequest{std::string(request.method_string()), std::string(request.target()),
                                       request.version(), request.body(), request.keep_alive(), at});
    out.consumed = at;
    if (!request.keep_alive()) break;  // answered, then closed: nothing after it is read
  }
  return out;
}

}  // namespace tandem::server
