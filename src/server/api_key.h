// API-key checks for the HTTP transport: the bearer token of an Authorization header and a
// comparison whose time does not depend on where the first wrong byte is, so a client cannot
// find the key a byte at a time by timing. Pure functions; no sockets.
#pragma once

#include <string_view>

namespace tandem::server {

// True when `a` and `b` are equal; the time taken depends only on their lengths.
bool constant_time_equal(std::string_view a, std::string_view b);

// Whether an Authorization header value carries `key` as "Bearer KEY" (scheme case-insensitive,
// as RFC 6750 allows). An empty `key` accepts every request.
bool bearer_matches(std::string_view authorization, std::string_view key);

}  // namespace tandem::server
