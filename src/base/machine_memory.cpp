// physical_memory_bytes, resident_bytes and the out-of-memory message (see machine_memory.h).
#include "base/machine_memory.h"

#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include <fmt/format.h>

namespace tandem {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<int64_t>(pages) * page_size : 0;
}

int64_t resident_bytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  long long total_pages = 0, resident_pages = 0;
  const int read = std::fscanf(statm, "%lld %lld", &total_pages, &resident_pages);
  std::fclose(statm);
  const long page_size = ::sysconf(_SC_PAGESIZE);
  return read == 2 && page_size > 0 ? static_cast<int64_t>(resident_pages) * page_size : 0;
}

std::string binary_size(int64_t bytes) {
  constexpr std::array<const char*, 6> kUnits = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < kUnits.size()) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", value, kUnits[unit]);
}

std::string out_of_memory_message() {
  const int64_t resident = resident_bytes(), physical = physical_memory_bytes();
  std::string held;
  if (resident > 0 && physical > 0)
    held = fmt::format(": this process held {} resident of the machine's {}", binary_size(resident),
                       binary_size(physical));
  // A limit on the address space (ulimit -v, a container's) is what fails first when set.
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    held += fmt::format(", under an address-space limit of {}", binary_size(static_cast<int64_t>(limit.rlim_cur)));
  return "out of memory" + held + " (lower --ctx, --parallel or --kv-memory, or use a smaller model or weight type)";
}

}  // namespace tandem
