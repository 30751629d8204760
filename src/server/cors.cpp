// --allowed-origins (see cors.h): parsing the list and matching a request's Origin header.
#include "server/cors.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"

namespace tandem::server {

namespace {

// "scheme://host[:port]": what browsers send in Origin (no path, no user info, no spaces).
bool looks_like_origin(std::string_view origin) {
  const size_t sep = origin.find("://");
  if (sep == std::string_view::npos || sep == 0 || sep + 3 == origin.size()) return false;
  const auto scheme_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' ||
           c == '.';
  };
  if (!std::all_of(origin.begin(), origin.begin() + sep, scheme_char)) return false;
  const std::string_view rest = origin.substr(sep + 3);
  return std::none_of(rest.begin(), rest.end(), [](char c) {
    return c == '/' || c == '@' || c == '?' || c == '#' || c == ',' || static_cast<unsigned char>(c) <= 0x20 ||
           c == 0x7f;
  });
}

}  // namespace

CorsPolicy parse_allowed_origins(const std::vector<std::string>& values) {
  CorsPolicy policy;
  for (const std::string& value : values) {
    for (size_t start = 0;;) {
      const size_t comma = value.find(',', start);
      std::string origin = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (origin.size() > 1 && origin.back() == '/') origin.pop_back();
      if (origin == "*") {
        policy.any = true;
      } else {
        TANDEM_CHECK_INPUT(looks_like_origin(origin),
                           "--allowed-origins: '{}' is not an origin (scheme://host[:port], or '*' for any)", origin);
        if (std::find(policy.origins.begin(), policy.origins.end(), origin) == policy.origins.end())
          policy.origins.push_back(std::move(origin));
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return policy;
}

std::string allowed_origin(const CorsPolicy& policy, std::string_view origin) {
  if (origin.empty()) return {};
  if (policy.any) return "*";
  // Scheme and host are case-insensitive (browsers send them lower-case; an operator may not).
  const auto same = [origin](const std::string& listed) {
    return std::equal(listed.begin(), listed.end(), origin.begin(), origin.end(), [](char a, char b) {
      return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
    });
  };
  if (std::any_of(policy.origins.begin(), policy.origins.end(), same)) return std::string(origin);
  return {};
}

}  // namespace tandem::server
