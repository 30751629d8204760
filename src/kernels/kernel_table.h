// The dispatch hub: the table of the level in use (kernel_table(), from active_isa() in
// cpu_features.h and TANDEM_ATTENTION), chosen once per process; nothing else in the build
// tests the CPU level. Tests call each level's table directly (kernel_table(isa)) to hold it
// against the scalar references, and TANDEM_ISA=avx2|avx512|scalar runs a lower level's real
// code on a newer CPU. The table's type and the kernels' contracts: kernel_contract.h.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/kernel_contract.h"
#include "kernels/portable_kernels.h"

namespace tandem {

// Packs `weight` for the table's level when it has a layout for it (as the loader does):
// returns the packed bytes and points weight.packed at them; an empty vector otherwise.
std::vector<uint8_t> pack_for_level(const KernelTable& table, TensorView& weight);

// What the attention kernels multiply in. F32 is every level's own kernel and the default.
// On an AVX-512 level with AVX512_BF16, TANDEM_ATTENTION asks for bf16 dot products
// (kernels/avx512/attention_bf16_avx512.cpp): "bf16" rounds Q, K, the softmax weights and V
// to bf16 (the scores lose precision: greedy tokens of a tiny model can differ from f32's),
// "bf16-values" only the weights and V (the scores stay the f32 kernel's). Either is the same
// kernel for prefill and decode, so batch invariance holds as with f32.
std::string_view attention_arithmetic_name(AttentionArithmetic arithmetic);
// Whether the CPU and a level can run `arithmetic` (F32 always).
bool attention_arithmetic_available(Isa isa, AttentionArithmetic arithmetic);
// TANDEM_ATTENTION for the active level: F32 when unset, "f32", or not available here.
AttentionArithmetic active_attention_arithmetic();

// The active level's table, its attention that of active_attention_arithmetic().
const KernelTable& kernel_table();
// A given level (must be supported by the CPU), with the level's own (f32) attention.
const KernelTable& kernel_table(Isa isa);
// A given level's table with the attention of `arithmetic` (must be available).
const KernelTable& kernel_table(Isa isa, AttentionArithmetic arithmetic);

}  // namespace tandem
