// parse_byte_size: a decimal number, then an optional unit K/M/G/T (with an optional "B" or
// "iB"; case-insensitive), or "B" alone.
#include "cli/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include "base/error.h"

namespace tandem::cli {

int64_t parse_byte_size(std::string_view text) {
  const std::string shown(text);
  size_t number_end = 0;
  while (number_end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[number_end])) || text[number_end] == '.'))
    ++number_end;
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + number_end, value);
  TANDEM_CHECK_INPUT(number_end > 0 && error == std::errc{} && end == text.data() + number_end,
                     "'{}' is not a size (bytes, or a number with K, M, G or T: 512M, 1G)", shown);
  std::string unit;
  for (char c : text.substr(number_end))
    if (c != ' ') unit += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double multiple = 1;
  if (!unit.empty() && unit != "B") {
    const std::string_view rest = std::string_view(unit).substr(1);
    TANDEM_CHECK_INPUT(rest.empty() || rest == "B" || rest == "IB", "unknown unit in size '{}' (use K, M, G or T)",
                       shown);
    switch (unit[0]) {
      case 'K': multiple = 1024.0; break;
      case 'M': multiple = 1024.0 * 1024; break;
      case 'G': multiple = 1024.0 * 1024 * 1024; break;
      case 'T': multiple = 1024.0 * 1024 * 1024 * 1024; break;
      default: TANDEM_CHECK_INPUT(false, "unknown unit in size '{}' (use K, M, G or T)", shown);
    }
  }
  const double bytes = std::floor(value * multiple);
  TANDEM_CHECK_INPUT(bytes < 9.0e18, "size '{}' is too large", shown);
  return static_cast<int64_t>(bytes);
}

}  // namespace tandem::cli
