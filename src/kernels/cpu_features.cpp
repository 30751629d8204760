// CPU feature detection with the compiler's cpuid wrappers (__builtin_cpu_supports), which
// also account for the OS enabling the wide registers.
#include "kernels/cpu_features.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace tandem {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa detect_isa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::Avx2;
#endif
  return Isa::Scalar;
}

Isa active_isa() {
  static const Isa isa = [] {
    Isa best = detect_isa();
    const char* requested = std::getenv("TANDEM_ISA");
    if (requested == nullptr) return best;
    for (Isa candidate : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
      if (isa_name(candidate) == requested && static_cast<int>(candidate) <= static_cast<int>(best)) return candidate;
    return best;
  }();
  return isa;
}

std::string cpu_feature_summary() {
  std::string features;
#if defined(__x86_64__)
  __builtin_cpu_init();
  auto add = [&](const char* name, bool present) {
    if (present) features += std::string(features.empty() ? "" : " ") + name;
  };
  add("sse4.2", __builtin_cpu_supports("sse4.2"));
  add("avx", __builtin_cpu_supports("avx"));
  add("avx2", __builtin_cpu_supports("avx2"));
  add("fma", __builtin_cpu_supports("fma"));
  add("f16c", __builtin_cpu_supports("f16c"));
  add("avx512f", __builtin_cpu_supports("avx512f"));
  add("avx512bw", __builtin_cpu_supports("avx512bw"));
  add("avx512vl", __builtin_cpu_supports("avx512vl"));
  add("avx512vnni", __builtin_cpu_supports("avx512vnni"));
  add("avx512bf16", __builtin_cpu_supports("avx512bf16"));
#endif
  return fmt::format("kernels: {} (best available: {}); cpu features: {}", isa_name(active_isa()),
                     isa_name(detect_isa()), features.empty() ? "none detected" : features);
}

}  // namespace tandem
