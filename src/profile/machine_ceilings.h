// MachineCeilings: the roofline's ceilings for this CPU, at one kernel level and thread count
// — read bandwidth (a STREAM-style sum over a buffer far larger than the caches, the method
// of bench/bandwidth.cpp), the peak rates of this level's own 8-bit and f32 GEMMs on
// cache-resident operands, and the instruction ceilings of f32 FMAs and bf16 dot products
// (kernels/instruction_peak.h: what attention's arithmetic is held against) — measured once (`tandem bench --machine`)
// and cached as JSON in
// ~/.cache/tandem/machine-<cpu>.json, one entry per "<level>-t<threads>". No printing here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "base/dtype.h"
#include "base/thread_pool.h"

namespace tandem {

struct MachineCeilings {
  std::string cpu;  // the CPU's model name (/proc/cpuinfo)
  std::string isa;  // the kernel level measured ("avx512", ...)
  int threads = 0;
  double read_gbps = 0.0;   // 1e9 bytes/s, best pass
  double int8_gops = 0.0;   // the level's Q8_0 GEMM, 1e9 multiply-adds x 2 per second
  double f32_gflops = 0.0;  // the level's F32 GEMM
  // Instruction ceilings, 0 where the level has no such loop (scalar; bf16 without
  // AVX512_BF16) or the cached entry predates them.
  double fma_gflops = 0.0;        // f32 FMAs on register operands
  double bf16_gflops = 0.0;       // vdpbf16ps on register operands
  double tile_bf16_gflops = 0.0;  // AMX tdpbf16ps on tile operands (the AMX level with AMX-BF16)
  double dot_i8_gops = 0.0;       // the level's 8-bit dot product (AVX2 vpmaddubsw + vpaddw, AVX-512 vpdpbusd)
};

// "AMD EPYC (family 26 model 2)": /proc/cpuinfo's model name, family and model; "unknown cpu".
std::string cpu_model_name();
// $TANDEM_CACHE_DIR, else $XDG_CACHE_HOME/tandem, else ~/.cache/tandem; then
// /machine-<cpu model, lowercase, [a-z0-9] runs joined by '-'>.json.
std::string default_ceilings_path();

// Best of `passes` parallel sums over `mib` MiB, split over the pool's threads.
double measure_read_bandwidth(ThreadPool& pool, int64_t mib, int passes);
// Best rate of matmul() with a [n_out, n_in] weight of `type` (packed as the loader packs it)
// over `n_tokens` tokens: a few MiB of weights, reused across tokens, so compute bound.
double measure_gemm_peak(ThreadPool& pool, DType type, int repetitions = 8);
// The instruction loops of kernels/instruction_peak.h.
enum class InstructionLoopKind { FmaF32, DotBf16, TileBf16, DotI8 };
// Best rate of the level's instruction loop of `kind`, run on every thread of the pool at once;
// 0 where the level has none.
double measure_instruction_peak(ThreadPool& pool, InstructionLoopKind kind, int repetitions = 5);
// All of them for the active level and the pool's thread count.
MachineCeilings measure_ceilings(ThreadPool& pool, int64_t bandwidth_mib = 512);

// Adds (or replaces) the entry of ceilings.isa/threads in the JSON file at `path`, creating
// it and its folder. Throws InputError when it cannot be written.
void save_ceilings(const std::string& path, const MachineCeilings& ceilings);
// The entry for isa/threads, if the file has one for this CPU; nullopt otherwise (also for a
// missing or unreadable file: the ceilings are then simply unknown).
std::optional<MachineCeilings> load_ceilings(const std::string& path, std::string_view isa, int threads);

}  // namespace tandem
