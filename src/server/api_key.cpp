// Constant-time key comparison (see api_key.h).
#include "server/api_key.h"

#include <cctype>
#include <cstddef>

namespace tandem::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the expected length whatever the input, and fold every byte difference into one
  // value: no early exit, no data-dependent branch. Lengths are not secret here.
  unsigned difference = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    difference |= static_cast<unsigned>(x ^ static_cast<unsigned char>(b[i]));
  }
  return difference == 0;
}

bool bearer_matches(std::string_view authorization, std::string_view key) {
  if (key.empty()) return true;
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return false;
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return constant_time_equal(token, key);
}

}  // namespace tandem::server
