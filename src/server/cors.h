// CORS (--allowed-origins): which browser origins may call the API, and the headers that say
// so. No origin is allowed unless listed ('*' allows any): a page on another site must not
// drive a server the user runs locally. Pure functions; no sockets.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tandem::server {

struct CorsPolicy {
  bool any = false;                  // '*' was listed
  std::vector<std::string> origins;  // exact origins, "scheme://host[:port]"
  bool enabled() const { return any || !origins.empty(); }
};

// The policy from the flag's values, each an origin, '*' or a comma-separated list of them.
// A trailing '/' is dropped. InputError for what is not an origin (no scheme, a path, spaces).
CorsPolicy parse_allowed_origins(const std::vector<std::string>& values);

// The Access-Control-Allow-Origin value for a request's Origin header: "*" when any origin
// is allowed, the origin itself when it is listed, empty when it is not (or none was sent):
// then no CORS header at all is sent, and the browser keeps the answer from the page.
std::string allowed_origin(const CorsPolicy& policy, std::string_view origin);

// What a preflight (OPTIONS) is told: the methods and request headers the API takes.
constexpr std::string_view kCorsAllowMethods = "GET, POST, OPTIONS";
constexpr std::string_view kCorsAllowHeaders = "Authorization, Content-Type";
constexpr std::string_view kCorsMaxAgeSeconds = "600";

}  // namespace tandem::server
