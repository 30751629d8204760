// Human-readable sizes for CLI output ("1.09 GiB"), shared by the subcommands that print them.
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace tandem::cli {

inline std::string human_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", value, units[unit]);
}

}  // namespace tandem::cli
