// CPU feature detection from CPUID and XGETBV (instruction support and the OS saving the
// wide registers), plus the AMX permission request Linux requires.
#include "kernels/cpu_features.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <fmt/format.h>

namespace tandem {

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
    case Isa::Amx: return "amx";
  }
  return "?";
}

namespace {

// What the CPU and OS support, read with CPUID and XGETBV directly: the compilers'
// __builtin_cpu_supports does not know every feature (clang 14 lacks f16c and AMX).
struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512vnni = false, avx512bf16 = false;
  bool amx_tile = false, amx_int8 = false, amx_bf16 = false;
};

CpuFeatures read_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1;
  const bool avx = (ecx >> 28) & 1;
  f.fma = (ecx >> 12) & 1;
  f.f16c = (ecx >> 29) & 1;
  if (!osxsave || !avx) return f;
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  const bool os_avx = (xcr0_low & 0x6) == 0x6;          // XMM and YMM state
  const bool os_avx512 = (xcr0_low & 0xe0) == 0xe0;     // opmask, ZMM upper halves, ZMM16-31
  const bool os_amx = (xcr0_low & 0x60000) == 0x60000;  // tile config and tile data
  if (!os_avx) {
    f.fma = f.f16c = false;
    return f;
  }
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return f;
  f.avx2 = (ebx >> 5) & 1;
  if (os_avx512) {
    f.avx512f = (ebx >> 16) & 1;
    f.avx512bw = (ebx >> 30) & 1;
    f.avx512vl = (ebx >> 31) & 1;
    f.avx512vnni = (ecx >> 11) & 1;
  }
  if (os_amx) {
    f.amx_tile = (edx >> 24) & 1;
    f.amx_int8 = (edx >> 25) & 1;
    f.amx_bf16 = (edx >> 22) & 1;
  }
  if (os_avx512 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) f.avx512bf16 = (eax >> 5) & 1;
#endif
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = read_cpu_features();
  return features;
}

// AMX tile data must be requested from Linux once per process before the first tile
// instruction; a kernel that refuses (or an old one) means no AMX.
bool amx_tiles_usable() {
#if defined(__x86_64__) && defined(__linux__)
  if (!cpu_features().amx_tile || !cpu_features().amx_int8) return false;
  static const bool granted = [] {
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
#else
  return false;
#endif
}

}  // namespace

Isa detect_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni && f.fma && f.f16c && f.avx2)
    return amx_tiles_usable() ? Isa::Amx : Isa::Avx512;
  if (f.avx2 && f.fma && f.f16c) return Isa::Avx2;
  return Isa::Scalar;
}

Isa active_isa() {
  static const Isa isa = [] {
    Isa best = detect_isa();
    const char* requested = std::getenv("TANDEM_ISA");
    if (requested == nullptr) return best;
    for (Isa candidate : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Amx})
      if (isa_name(candidate) == requested && static_cast<int>(candidate) <= static_cast<int>(best)) return candidate;
    return best;
  }();
  return isa;
}

bool cpu_has_amx_bf16() { return amx_tiles_usable() && cpu_features().amx_bf16 && cpu_has_avx512_bf16(); }

bool cpu_has_avx512_bf16() { return cpu_features().avx512bf16 && cpu_features().avx512f && cpu_features().avx512bw; }

std::string cpu_feature_summary() {
  const CpuFeatures& f = cpu_features();
  std::string features;
  auto add = [&](const char* name, bool present) {
    if (present) features += std::string(features.empty() ? "" : " ") + name;
  };
  add("avx2", f.avx2);
  add("fma", f.fma);
  add("f16c", f.f16c);
  add("avx512f", f.avx512f);
  add("avx512bw", f.avx512bw);
  add("avx512vl", f.avx512vl);
  add("avx512vnni", f.avx512vnni);
  add("avx512bf16", f.avx512bf16);
  add("amx-tile", f.amx_tile);
  add("amx-int8", f.amx_int8);
  add("amx-bf16", f.amx_bf16);
  return fmt::format("kernels: {} (best available: {}); cpu features: {}", isa_name(active_isa()),
                     isa_name(detect_isa()), features.empty() ? "none detected" : features);
}

}  // namespace tandem
