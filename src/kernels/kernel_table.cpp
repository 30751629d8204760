// kernel_table(): the hub that picks a level's table (each built in its folder and declared in
// its header: portable_kernels.h, avx2/avx2_kernels.h, avx512/avx512_kernels.h,
// amx/amx_kernels.h), the bf16-attention variants on first use, and the loader's packing. The
// only file in kernels/ that includes every level.
#include "kernels/kernel_table.h"

#include <array>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>

#include "base/error.h"
#include "kernels/amx/amx_kernels.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/portable_kernels.h"

namespace tandem {

const KernelTable& kernel_table(Isa isa) {
  TANDEM_ASSERT(static_cast<int>(isa) <= static_cast<int>(detect_isa()));
  switch (isa) {
    case Isa::Scalar: return portable::level_table();
    case Isa::Avx2: return avx2::level_table();
    case Isa::Avx512: return avx512::level_table();
    case Isa::Amx: return amx::level_table();
  }
  return portable::level_table();
}

std::vector<uint8_t> pack_for_level(const KernelTable& table, TensorView& weight) {
  std::vector<uint8_t> packed;
  if (table.packer.packable == nullptr || !table.packer.packable(weight)) return packed;
  packed.resize(static_cast<size_t>(table.packer.packed_bytes(weight)));
  table.packer.pack_into(weight, packed.data());
  weight.packed = packed.data();
  return packed;
}

std::string_view attention_arithmetic_name(AttentionArithmetic arithmetic) {
  switch (arithmetic) {
    case AttentionArithmetic::F32: return "f32";
    case AttentionArithmetic::Bf16: return "bf16";
    case AttentionArithmetic::Bf16Values: return "bf16-values";
  }
  return "?";
}

bool attention_arithmetic_available(Isa isa, AttentionArithmetic arithmetic) {
  return arithmetic == AttentionArithmetic::F32 ||
         (static_cast<int>(isa) >= static_cast<int>(Isa::Avx512) && cpu_has_avx512_bf16());
}

AttentionArithmetic active_attention_arithmetic() {
  static const AttentionArithmetic active = [] {
    const char* requested = std::getenv("TANDEM_ATTENTION");
    if (requested == nullptr) return AttentionArithmetic::F32;
    for (AttentionArithmetic candidate : {AttentionArithmetic::Bf16, AttentionArithmetic::Bf16Values})
      if (attention_arithmetic_name(candidate) == requested && attention_arithmetic_available(active_isa(), candidate))
        return candidate;
    return AttentionArithmetic::F32;
  }();
  return active;
}

const KernelTable& kernel_table(Isa isa, AttentionArithmetic arithmetic) {
  TANDEM_ASSERT(attention_arithmetic_available(isa, arithmetic));
  if (arithmetic == AttentionArithmetic::F32) return kernel_table(isa);
  // [level - Avx512][arithmetic - Bf16], built on first use (a level the CPU lacks is never built).
  static std::array<std::array<std::unique_ptr<KernelTable>, 2>, 2> tables;
  static std::mutex building;
  const std::lock_guard lock(building);
  auto& table = tables[static_cast<size_t>(static_cast<int>(isa) - static_cast<int>(Isa::Avx512))]
                      [static_cast<size_t>(static_cast<int>(arithmetic) - static_cast<int>(AttentionArithmetic::Bf16))];
  if (table == nullptr)
    table = std::make_unique<KernelTable>(isa == Isa::Amx ? amx::with_bf16_attention(kernel_table(isa), arithmetic)
                                                          : avx512::with_bf16_attention(kernel_table(isa), arithmetic));
  return *table;
}

const KernelTable& kernel_table() {
  static const KernelTable& table = kernel_table(active_isa(), active_attention_arithmetic());
  return table;
}

}  // namespace tandem
