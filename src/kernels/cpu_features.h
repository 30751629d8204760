// Which instruction-set level the kernels run at, detected once at start-up. One binary
// carries scalar, AVX2+FMA and AVX-512 (F/BW/VL/VNNI) kernels; the best the CPU supports is
// used, unless TANDEM_ISA=scalar|avx2|avx512 asks for a lower one (tests, comparisons).
#pragma once

#include <string>
#include <string_view>

namespace tandem {

enum class Isa { Scalar = 0, Avx2 = 1, Avx512 = 2, Amx = 3 };

std::string_view isa_name(Isa isa);
// The best level this CPU supports.
Isa detect_isa();
// The level in use: detect_isa(), lowered by TANDEM_ISA when set. Fixed for the process.
Isa active_isa();
// Whether the CPU (and OS) has AVX512_BF16 (vdpbf16ps), for the bf16 attention kernel.
bool cpu_has_avx512_bf16();
// Whether AMX tiles are usable and have AMX-BF16 (tdpbf16ps), for the tiled bf16 attention
// kernel of the AMX level (kernels/amx/attention_amx.cpp).
bool cpu_has_amx_bf16();
// A one-line description of the CPU's relevant features, for `tandem info --cpu`.
std::string cpu_feature_summary();

}  // namespace tandem
